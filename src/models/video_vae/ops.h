#pragma once
// Patchify / unpatchify and the per-channel latent statistics (reference:
// model/video_vae/ops.py).
#include <cstdint>

#include "core/tensor.h"
#include "io/weights.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

// "b c (f p) (h q) (w r) -> b (c p r q) f h w" with p = patch_t, q = r = patch_hw: the channel
// index is c * p * hw^2 + p_i * hw^2 + r_i * hw + q_i (the WIDTH sub-index before the height's).
Tensor patchify(const Tensor& x, int64_t patch_hw, int64_t patch_t = 1);
// The exact inverse.
Tensor unpatchify(const Tensor& x, int64_t patch_hw, int64_t patch_t = 1);

// `per_channel_statistics.{mean-of-means,std-of-means}` [C]: the encoder's output is normalised
// with them and the decoder's input un-normalised (one copy in the file, shared by both).
struct PerChannelStatistics {
  Tensor mean_of_means;  // [C]
  Tensor std_of_means;   // [C]

  // Binds the two buffers from `w` (already scoped to "per_channel_statistics.").
  static PerChannelStatistics load(io::WeightMap& w, int64_t channels, const nn::LoadOptions& opt);
  int64_t channels() const { return mean_of_means.size(0); }
  // x [B, C, ...]: x * std + mean.
  Tensor un_normalize(const Tensor& x) const;
  // (x - mean) / std.
  Tensor normalize(const Tensor& x) const;
};

}  // namespace ltx::models::video_vae
