#pragma once
// Blockwise FP8 on the CPU: the reference implementation of ops/quantized_linear.h's blockwise
// rounding rules (arguments checked there).
#include "core/tensor.h"
#include "op_types/quantized_linear.h"

namespace ltx::cpu {

// Per 128 x 128 tile of a contiguous f32 [out, in] weight: max |w| (NaN when the tile holds a
// NaN or inf). f32 [ceil(out / 128), ceil(in / 128)].
Tensor tile_amax(const Tensor& w);
// The tiles quantised with the scales from `amax` (every entry finite and > 0).
ops::Fp8Blockwise quantize_e4m3_tiles(const Tensor& w, const Tensor& amax);
// f32(weight) * tile scale, rounded to dtype (bf16 or f32); weight and scale contiguous.
Tensor dequantize_e4m3_tiles(const Tensor& weight, const Tensor& scale, DType dtype);
// ops::quantize_fp8_per_group.
ops::Fp8PerGroup quantize_e4m3_groups(const Tensor& x);
// ops::linear_fp8_blockwise (weight and weight_scale contiguous).
Tensor linear_fp8_blockwise(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias);

}  // namespace ltx::cpu
