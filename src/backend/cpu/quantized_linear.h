#pragma once
// FP8 (float8_e4m3fn) quantisation and the per-tensor-scaled FP8 linear on the CPU: the
// reference implementation of ops/quantized_linear.h's rounding rules (arguments checked there).
#include "core/tensor.h"
#include "op_types/quantized_linear.h"

namespace ltx::cpu {

// e4m3(clamp(x * m, -448, 448)) with m = scale or 1 / scale (f32), rounded to bf16 for a bf16 x,
// and the product rounded to x's dtype (bf16 or f32); contiguous result of x's shape.
Tensor quantize_e4m3(const Tensor& x, const Tensor& scale, ops::Fp8ScaleUse use);

// ops::linear_fp8_scaled: the e4m3 products summed in f32 (OpenBLAS sgemm on the exact f32
// values), scaled, rounded to x's dtype, then the bias added in that dtype.
Tensor linear_fp8_scaled(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                         const Tensor& input_scale, const Tensor& bias);

// ops::quantize_fp8_per_token: per row of the last dim, the scale from the row's finite amax.
ops::Fp8PerToken quantize_e4m3_per_row(const Tensor& x);

// ops::linear_fp8_per_token.
Tensor linear_fp8_per_token(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias);

}  // namespace ltx::cpu
