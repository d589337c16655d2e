#pragma once
// Linear layers on GGML-quantized weights (the GGUF files' Q8_0 ... Q6_K, and F32 / F16 / BF16
// rows), computed without dequantising the whole model: each call dequantises groups of weight
// rows (op_types/ggml_blocks.h's per-block code, bit for bit ggml's dequantize_row_*, on both
// backends) and multiplies by them with the dense GEMM.
//   CPU: x f32; per group of output rows (about 1 MiB of f32 values) the rows are dequantised
//        into a thread's buffer and multiplied with OpenBLAS, the groups spread over the pool.
//   CUDA: x bf16 or f32 (the output's dtype); the weight is dequantised into a scratch of x's
//        dtype, at most kGgmlScratchBytes at a time (larger weights in chunks of output rows,
//        each GEMM writing its columns of the output), and multiplied with cuBLASLt (fp32
//        accumulation, the bias, and GELU where asked, in its epilogue).
// So the result equals ops::linear(x, dequantize_ggml(w, x's dtype), bias) up to the GEMMs'
// summation order (bit for bit on CUDA when the weight fits one scratch).
#include <string>

#include "core/tensor.h"
#include "op_types/ggml_linear.h"

namespace ltx::ops {

// Throws naming `what` unless `w` is a GGML weight this build can multiply by: a type with a
// dequantiser (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K .. Q6_K), in_features a whole
// number of its blocks, and blocks a contiguous u8 [out, bytes per row] tensor.
void check_ggml_weight(const GgmlWeight& w, const std::string& what);

// y = x @ W^T + bias: x [..., in] (any strides), bias [out] or undefined -> y [..., out] in x's
// dtype (CPU: f32 only; CUDA: bf16 or f32, bias bf16 or f32).
Tensor linear_ggml(const Tensor& x, const GgmlWeight& w, const Tensor& bias = Tensor());

// gelu_tanh(linear_ggml(x, w, bias)); on CUDA with a bf16 x and no or a bf16 bias the GELU is
// cuBLASLt's epilogue (as ops::linear_gelu_tanh: applied before the output's rounding).
Tensor linear_ggml_gelu_tanh(const Tensor& x, const GgmlWeight& w, const Tensor& bias = Tensor());

// The whole weight [out, in] as `dtype` (f32, bf16 or f16) on its device: each value in f32 as
// ggml computes it, then rounded once.
Tensor dequantize_ggml(const GgmlWeight& w, DType dtype);

}  // namespace ltx::ops
