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

}  // namespace ltx::ops
