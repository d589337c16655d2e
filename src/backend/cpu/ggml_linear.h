#pragma once
// Linear layers on GGML blocks on the CPU (arguments checked by ops/ggml_linear.cpp): groups of
// weight rows dequantised into f32 (op_types/ggml_blocks.h), then OpenBLAS.
#include "core/tensor.h"
#include "op_types/ggml_linear.h"

namespace ltx::cpu {

// Values dequantised per group of weight rows (1 MiB of f32): the group's rows stay in the
// cache for the GEMM, and each GEMM still multiplies by enough rows to amortise its packing of x.
inline constexpr int64_t kGgmlGroupValues = int64_t{1} << 18;

// y [..., out] f32 = x [..., in] f32 (any strides) @ W^T + bias (f32 [out] or undefined).
Tensor linear_ggml(const Tensor& x, const ops::GgmlWeight& w, const Tensor& bias);

// The whole weight as f32 [out, in].
Tensor dequantize_ggml(const ops::GgmlWeight& w);

}  // namespace ltx::cpu
