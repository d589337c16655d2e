#pragma once
// 3-D neighborhood attention (natten.na3d semantics: non-causal, dilation 1).
#include <array>
#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace ltx::ops {

// q, k [B, T, H, W, NH, D], v [B, T, H, W, NH, Dv] (any strides) -> out [B, T, H, W, NH, Dv].
// Each query (t, h, w) attends, per head, to the keys of a Kt x Kh x Kw window: along an axis of
// length L with kernel K the window is [s, s + K) with s = clamp(i - K / 2, 0, L - K), i.e. it is
// shifted inward at the borders and never truncated; K >= L means the whole axis.
//   out = softmax_window(q . k * scale) @ v,   scale defaults to 1 / sqrt(D).
// CPU: f32; the window's scores live in a per-thread buffer (Kt Kh Kw floats), nothing else is
// materialised.
// The query columns (W positions) [begin, begin + count) to compute (count -1: to the end). The
// output then holds only those, [B, T, H, count, NH, Dv]; the keys and every window are still
// those of the whole volume. (The diffusion decoder's W-chunked attention keeps only each slab's
// core columns.)
struct QueryColumns {
  int64_t begin = 0;
  int64_t count = -1;
};

Tensor neighborhood_attention_3d(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::array<int64_t, 3>& kernel,
                                 std::optional<double> scale = std::nullopt,
                                 const QueryColumns& cols = {});

// The window start of position i along an axis of length `length` with kernel `kernel` (the rule
// above; 0 when kernel >= length).
int64_t neighborhood_window_start(int64_t i, int64_t length, int64_t kernel);

}  // namespace ltx::ops
