#pragma once
// Space <-> depth resampling blocks of the video VAE (reference: model/video_vae/sampling.py).
// Channel order of both: "(c p1 p2 p3)" with c outermost, then (time, height, width).
#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "models/video_vae/convolution.h"

namespace ltx::models::video_vae {

// Encoder compress_*_res: with a time stride of 2 frame 0 is duplicated in front; then
// space_to_depth(causal_conv(x)) (conv to out/prod(stride) channels) plus the skip path
// space_to_depth(x) averaged over groups of in*prod(stride)/out consecutive channels.
// Binds `conv.conv.{weight,bias}`.
struct SpaceToDepthDownsample {
  CausalConv3d conv;
  std::array<int64_t, 3> stride{1, 1, 1};
  int64_t group_size = 1;

  static SpaceToDepthDownsample load(io::WeightMap& w, int64_t in_channels, int64_t out_channels,
                                     std::array<int64_t, 3> stride, PaddingMode padding,
                                     const nn::LoadOptions& opt);
  Tensor operator()(Tensor x, bool causal) const;
};

// Decoder compress_*: depth_to_space(causal_conv(x)) (conv to prod(stride)*in/reduction channels),
// first frame dropped with a time stride of 2; `residual` adds depth_to_space(x) tiled
// prod(stride)/reduction times along channels (first frame dropped likewise).
// Binds `conv.conv.{weight,bias}`, keeping the conv's output channels permuted to
// "(p1 p2 p3 c)" (ops::permute_depth_channels; depth_to_space with Subpositions::Outer).
struct DepthToSpaceUpsample {
  CausalConv3d conv;
  std::array<int64_t, 3> stride{1, 1, 1};
  bool residual = false;
  int64_t reduction = 1;

  static DepthToSpaceUpsample load(io::WeightMap& w, int64_t in_channels,
                                   std::array<int64_t, 3> stride, bool residual,
                                   int64_t out_channels_reduction_factor, PaddingMode padding,
                                   const nn::LoadOptions& opt);
  int64_t out_channels() const;
  Tensor operator()(Tensor x, bool causal) const;
};

}  // namespace ltx::models::video_vae
