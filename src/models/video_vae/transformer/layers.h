#pragma once
// Small layers of the diffusion decoder's NA transformer (reference:
// model/video_vae/transformer/layers.py, swiglu.py).
#include <array>
#include <cstdint>
#include <functional>

#include "core/tensor.h"
#include "io/weights.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

// Channels-last upsampler: Linear(C -> prod(stride) * C / reduction), then
// "b t h w (c p1 p2 p3) -> b (t p1) (h p2) (w p3) c" (held with the projection's rows reordered
// to (p1 p2 p3 c) at load, so the shuffle copies contiguous channel runs); with a time stride of
// 2 the duplicate leading frame is dropped when `drop_leading_frame` (the tile holds the video's
// first frame).
struct LinearPixelShuffleUpsample {
  nn::Linear proj;
  std::array<int64_t, 3> stride{};
  int64_t out_channels = 0;

  static LinearPixelShuffleUpsample load(io::WeightMap& w, int64_t in_channels,
                                         const std::array<int64_t, 3>& stride, int64_t reduction,
                                         const nn::LoadOptions& opt);
  // x [B, T, H, W, C] -> [B, T p1 (- 1), H p2, W p3, out_channels].
  Tensor operator()(const Tensor& x, bool drop_leading_frame = true) const;
  // Only the pixel shuffle (and drop) of an already projected x.
  Tensor shuffle(const Tensor& projected, bool drop_leading_frame) const;
};

// w_down(silu(w_gate y) * w_up y), no biases; hidden = roundup(4 C, 16). w_gate and w_up run as
// one GEMM over their stacked weights (w_gate_up [2 hidden, C]: gate rows first) and silu_mul
// reads its two halves in place. Rows go through in chunks of at most max_hidden_elements /
// hidden tokens: the stage-5 canvas of a 1536 x 1024 x 121 decode is 12 M tokens, whose hidden
// tensors would take tens of GB in bf16 at once. Every row is computed the same way whatever the
// chunking.
struct SwiGLU {
  nn::Linear w_gate_up, w_down;
  int64_t max_hidden_elements = int64_t{1} << 28;
  static int64_t hidden_dim(int64_t dim) { return (dim * 4 + 15) / 16 * 16; }
  static SwiGLU load(io::WeightMap& w, int64_t dim, const nn::LoadOptions& opt);
  // From separate gate / up / down layers (w_gate [hidden, C], w_up [hidden, C]).
  static SwiGLU from(const nn::Linear& w_gate, const nn::Linear& w_up, const nn::Linear& w_down);
  Tensor operator()(const Tensor& y) const;
  // The MLP input of residual rows [first, first + rows.size(0)), given those rows [n, C] before
  // their update.
  using RowInput = std::function<Tensor(const Tensor& rows, int64_t first)>;
  // residual += (*this)(input(rows)) chunk by chunk (residual contiguous), so that neither the
  // output nor the input (a norm of the residual, say) is ever whole-size: bit-identical to adding
  // the whole output. Chunks stay within segments of `segment` rows (one sample's rows when the
  // input depends on the sample). Each chunk is one ops::swiglu_add_ (the fused kernel on
  // Hopper, whose chunks are hidden / C times larger since it stores no hidden activations).
  void add_into(const Tensor& residual, const RowInput& input, int64_t segment) const;

 private:
  // fn(first, n) for consecutive row chunks of `rows` rows, within segments of `segment` rows;
  // a chunk holds at most max_hidden_elements / width rows (width: the widest intermediate).
  template <typename Fn>
  void for_each_chunk(int64_t rows, int64_t segment, int64_t width, const Fn& fn) const;
  // Rows per chunk when an intermediate is `width` wide: max_hidden_elements / width, at least 1.
  int64_t chunk_rows(int64_t width) const;
  Tensor rows_forward(const Tensor& y_rows) const;  // [n, C] -> [n, C]
};

}  // namespace ltx::models::video_vae
