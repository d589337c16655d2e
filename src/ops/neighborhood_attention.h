#pragma once
// 3-D neighborhood attention (natten.na3d semantics: non-causal, dilation 1).
#include <array>
#include <cstdint>
#include <optional>

#include "core/tensor.h"
#include "op_types/neighborhood_attention.h"

namespace ltx::ops {

// q, k [B, T, H, W, NH, D], v [B, T, H, W, NH, Dv] (any strides) -> out [B, T, H, W, NH, Dv].
// Each query (t, h, w) attends, per head, to the keys of a Kt x Kh x Kw window: along an axis of
// length L with kernel K the window is [s, s + K) with s = clamp(i - K / 2, 0, L - K), i.e. it is
// shifted inward at the borders and never truncated; K >= L means the whole axis.
//   out = softmax_window(q . k * scale) @ v,   scale defaults to 1 / sqrt(D).
// CPU: f32; the window's scores live in a per-thread buffer (Kt Kh Kw floats), nothing else is
// materialised. cols: the query columns to compute (QueryColumns in
// op_types/neighborhood_attention.h, with the window rule neighborhood_window_start).
Tensor neighborhood_attention_3d(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::array<int64_t, 3>& kernel,
                                 std::optional<double> scale = std::nullopt,
                                 const QueryColumns& cols = {});

}  // namespace ltx::ops
