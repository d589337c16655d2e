#pragma once
// Dense linear layers on CUDA through cuBLASLt (one handle per device, algorithm choice cached per
// problem, workspace from the caching allocator, everything on the current stream).
#include "core/tensor.h"

namespace ltx::cuda {

// y = x @ weight^T + bias, the torch.nn.functional.linear contract. The weight's dtype picks
// the precision:
//   x      [..., in]  bf16 or f32, converted to the weight's dtype first (f32 -> bf16 rounds to
//                     nearest even, like autocast); any strides as long as the rows can be
//                     addressed with one leading dimension (else a contiguous copy is made);
//   weight [out, in]  bf16, or f32 for a full-precision f32 GEMM (no TF32); non-contiguous
//                     weights are copied;
//   bias   [out]      bf16 or f32, or an undefined Tensor for none;
//   y      [..., out] the weight's dtype, contiguous, on x's device.
// Products accumulate in fp32 (CUBLAS_COMPUTE_32F; split-K partial sums are never reduced in
// bf16); the bias is added to the fp32 accumulator in the cuBLASLt epilogue and the sum is rounded
// to bf16 once. (An f32 bias is applied by an f32 epilogue into an f32 buffer, then rounded to
// bf16: cuBLASLt wants the bias in D's type.)
// All tensors must be on one CUDA device; dtype, shape and device mismatches throw ltx::Error.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

// ops::matmul_in_order: a [M, K] @ b [K, N], f32 (any strides), each output summed over k in
// increasing order with __fmul_rn / __fadd_rn (never contracted), as the CPU loop does.
Tensor matmul_in_order(const Tensor& a, const Tensor& b);

// gelu_tanh(linear(x, weight, bias)) with cuBLASLt's GELU epilogue: the activation (its tanh
// approximation) is applied to the f32 accumulator plus bias and rounded to bf16 once, where the
// two ops round the linear output to bf16 first; so it matches them to bf16 accuracy, not bit for
// bit. Takes bf16 weights [out, in > 0] with no bias or a bf16 bias (linear_gelu_epilogue_applies).
Tensor linear_gelu_tanh(const Tensor& x, const Tensor& weight, const Tensor& bias);
bool linear_gelu_epilogue_applies(const Tensor& weight, const Tensor& bias);

// The GEMM of cuda::linear into columns [col0, col0 + weight.size(0)) of `out` (row-major
// [M, N], contiguous): out[:, cols] = x [M, K] (rows ldx apart, unit column stride) @ weight^T
// (+ bias), then GELU when `gelu` (bf16 only). x, weight, bias and out share one dtype, bf16 or
// f32. What a GEMM by a weight made a chunk of rows at a time writes into (ops::linear_ggml).
void linear_into_columns(const Tensor& out, int64_t col0, const Tensor& x, int64_t ldx,
                         const Tensor& weight, const Tensor& bias, bool gelu);

// The FP8 GEMM of ops::linear_fp8_scaled: y [M, N] (out_dtype, bf16 or f32) =
// (xq [M, K] @ weight [N, K]^T) * x_scale * w_scale (+ bias), rounded once to out_dtype.
// xq and weight contiguous float8_e4m3fn with K and N multiples of 16 (cuBLASLt's FP8 rule);
// the scales f32 one-element tensors on the device (read there, no host copy; an undefined
// x_scale is 1); bias [N] bf16
// with a bf16 output only (cuBLASLt's epilogue wants it in D's type), or undefined.
// Fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM), as torch._scaled_mm(use_fast_accum=True).
Tensor linear_fp8(const Tensor& xq, const Tensor& weight, const Tensor& x_scale,
                  const Tensor& w_scale, const Tensor& bias, DType out_dtype);

// The block-scaled FP8 GEMM of ops::linear_fp8_blockwise (Hopper): out [M, N] (bf16 or f32,
// contiguous) = sum over the K tiles t of x_scales[t][m] * w_scales[n / 128][t] * (the tile's
// e4m3 products summed by the tensor cores) (+ bias), rounded once to out's dtype.
//   xq        [M, K] float8_e4m3fn contiguous, M a multiple of 4 (cuBLASLt aligns each K tile's
//             M scales to 16 bytes)
//   x_scales  f32 [ceil(K / 128)][M], tokens fastest
//   weight    [N, K] float8_e4m3fn contiguous, K and N multiples of 16
//   w_scales  f32 [ceil(N / 128)][ceil(K / 128) rounded up to a multiple of 4], K tiles fastest
//   bias      [N] of out's dtype or undefined.
// Returns false, having computed nothing, when cuBLASLt has no algorithm for the bias epilogue
// with these scale modes (the caller adds the bias itself); throws for any other failure.
bool linear_fp8_block_scaled(const Tensor& out, const Tensor& xq, const Tensor& x_scales,
                             const Tensor& weight, const Tensor& w_scales, const Tensor& bias);

}  // namespace ltx::cuda
