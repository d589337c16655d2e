#pragma once
// Rotary position embeddings (LTX's apply_rotary_emb), applied with precomputed cos/sin.
#include "core/tensor.h"

namespace ltx::ops {

enum class RopeLayout {
  // Rotate pairs (x[i], x[i + D/2]) by angle i; cos/sin [..., D/2].
  Split,
  // Rotate pairs (x[2i], x[2i+1]); cos/sin [..., D], one value per element (the reference
  // repeats each angle twice).
  Interleaved,
};

// x [..., D] (D even), e.g. [B, H, T, Dh]; cos and sin have equal shapes whose last dim is D/2
// (Split) or D (Interleaved) and whose leading dims broadcast to x's (e.g. [B, 1, T, .] or
// [T, .]). Returns a new contiguous tensor shaped like x:
//   Split:        y[i] = x[i]*cos[i] - x[i+D/2]*sin[i];  y[i+D/2] = x[i+D/2]*cos[i] + x[i]*sin[i]
//   Interleaved:  y[2i] = x[2i]*cos[2i] - x[2i+1]*sin[2i]; y[2i+1] = x[2i+1]*cos[2i+1] + x[2i]*sin[2i+1]
// CPU: f32, each output is two fp32 products and one add/subtract (no FMA), as the reference's
// fp32 mul + addcmul rounds them. The reference casts cos/sin to the model dtype first; callers
// that want that round cos/sin themselves.
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, RopeLayout layout);

}  // namespace ltx::ops
