#pragma once
// Matrix products.
#include "core/tensor.h"

namespace ltx::ops {

// torch.matmul: a [..., M, K] @ b [..., K, N] -> [broadcast(...), M, N], batch dims broadcast.
// A 1-D a is a row vector [K] and a 1-D b a column vector [K]; their added dim is dropped.
// CPU: f32 only; transposed views (unit stride on either of the last two dims) are passed to
// BLAS as they are, other layouts are copied first.
Tensor matmul(const Tensor& a, const Tensor& b);

// a [M, K] @ b [K, N] -> [M, N], f32 on every backend, each output summed in one fixed order:
// out[m, n] = (((0 + a[m, 0] b[0, n]) + a[m, 1] b[1, n]) + ...) + a[m, K-1] b[K-1, n], every
// product rounded to f32 before its addition (no fused multiply-add), so the CPU and a GPU give
// the same bits. For LoRA fusion, where a GPU-fused weight must equal the CPU-fused one bit for
// bit; a tiled loop, not BLAS: meant for small K (a LoRA's rank). Any strides.
Tensor matmul_in_order(const Tensor& a, const Tensor& b);

// y = x @ weight^T + bias (torch.nn.functional.linear): x [..., in], weight [out, in] (torch
// layout), bias [out] or an undefined Tensor for none -> y [..., out]. CPU: f32 only, one GEMM
// over all leading rows.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// gelu_tanh(linear(x, weight, bias)), the feed-forward's first layer. CPU (and CUDA with f32
// weights or an f32 bias): exactly the two ops. CUDA with bf16 weights: one GEMM with cuBLASLt's
// GELU epilogue, which applies the activation to the f32 accumulator instead of the bf16-rounded
// linear output, so it matches the two ops to bf16 accuracy, not bit for bit
// (tests/cuda/matmul_test.cpp states the bound).
Tensor linear_gelu_tanh(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace ltx::ops
