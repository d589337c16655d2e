#pragma once
// The FP8 linear's vocabulary, shared by the dispatch layer (ops/quantized_linear.h) and both
// backends.
#include "core/tensor.h"

namespace ltx::ops {

// The largest finite float8_e4m3fn value; values are clamped to +-this before the cast, as the
// reference does (an unclamped cast turns |x| >= 480 into NaN).
inline constexpr float kE4m3Max = 448.0f;

// How a quantisation scale s turns into the multiplier m applied before the cast:
// the activations' input_scale is divided out (m = 1 / s), the weights' 448 / amax multiplied in.
enum class Fp8ScaleUse { Multiply, Divide };

// A weight quantised per tensor: weight ~= f32(weight_e4m3) * weight_scale.
struct Fp8PerTensor {
  Tensor weight;        // float8_e4m3fn, the source's shape
  Tensor weight_scale;  // f32, 0-d
};

// Activations quantised per token (per row of the last dim): x ~= f32(q) * row_scale.
struct Fp8PerToken {
  Tensor q;          // float8_e4m3fn, x's shape, contiguous
  Tensor row_scale;  // f32, x's shape without the last dim
};

// Blockwise FP8 (the reference's blockwise policy, ltx-core quantization/blockwise): weights in
// 128 x 128 tiles, activations in 1 x 128 groups along the input features, each with its own f32
// dequantisation scale. A dim that is not a multiple of 128 ends in one shorter tile / group
// (the reference's layers are all multiples of 128; ours also serve the tiny test models).
inline constexpr int64_t kFp8Block = 128;

inline int64_t fp8_blocks(int64_t n) { return (n + kFp8Block - 1) / kFp8Block; }

// A weight quantised per 128 x 128 tile: weight[o, i] ~= f32(weight_e4m3[o, i]) *
// weight_scale[o / 128, i / 128].
struct Fp8Blockwise {
  Tensor weight;        // float8_e4m3fn [out, in]
  Tensor weight_scale;  // f32 [ceil(out / 128), ceil(in / 128)]
};

// Activations quantised per token and 128 input features: x[r, i] ~= f32(q[r, i]) *
// group_scale[r, i / 128].
struct Fp8PerGroup {
  Tensor q;            // float8_e4m3fn, x's shape, contiguous
  Tensor group_scale;  // f32 [rows, ceil(in / 128)], rows = x's leading dims flattened
};

}  // namespace ltx::ops
