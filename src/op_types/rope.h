#pragma once
// The rotary embeddings' vocabulary, shared by the dispatch layer (ops/rope.h) and both backends.
#include <array>

#include "core/tensor.h"

namespace ltx::ops {

enum class RopeLayout {
  // Rotate pairs (x[i], x[i + D/2]) by angle i; cos/sin [..., D/2].
  Split,
  // Rotate pairs (x[2i], x[2i+1]); cos/sin [..., D], one value per element (the reference
  // repeats each angle twice).
  Interleaved,
};

struct QkRope {
  Tensor q, k;
};

// The tables of a 3-D interleaved RoPE on x [B, T, H, W, heads, D] with D = d_t + d_h + d_w: the
// chunk of axis a (t, h, w = x's dims 1, 2, 3) rotates its interleaved pairs with
// cos[a] / sin[a] [L_a, d_a] (one entry per element, as RopeLayout::Interleaved), row i being
// the angles of index i along that axis. Built once per grid and reused across calls (the
// decoder keeps them on the activations' device).
struct Rope3dTables {
  std::array<Tensor, 3> cos, sin;
};

}  // namespace ltx::ops
