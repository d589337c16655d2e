#pragma once
// FP8 (float8_e4m3fn) quantisation and the per-tensor-scaled FP8 linear on CUDA (arguments checked
// by ops/quantized_linear.cpp, whose header states the rounding rules).
#include "core/tensor.h"
#include "op_types/quantized_linear.h"

namespace ltx::cuda {

// e4m3(clamp(x * m, -448, 448)) with m = scale or 1 / scale read from the device (f32, rounded to
// bf16 for a bf16 x), the product rounded to x's dtype: bit for bit cpu::quantize_e4m3.
// Contiguous result of x's shape; no host synchronisation.
Tensor quantize_e4m3(const Tensor& x, const Tensor& scale, ops::Fp8ScaleUse use);

// ops::linear_fp8_scaled: quantize_e4m3 of x, then cuBLASLt's FP8 GEMM (cuda::linear_fp8).
// in and out must be multiples of 16.
Tensor linear_fp8_scaled(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                         const Tensor& input_scale, const Tensor& bias);

// ops::quantize_fp8_per_token: a block per row finds the row's finite amax, then quantises it;
// bit for bit cpu::quantize_e4m3_per_row.
ops::Fp8PerToken quantize_e4m3_per_row(const Tensor& x);

// ops::linear_fp8_per_token: quantize_e4m3_per_row, the FP8 GEMM with weight_scale only (rounded
// to x's dtype), then one pass that scales each row and adds the bias.
Tensor linear_fp8_per_token(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias);

}  // namespace ltx::cuda
