#pragma once
// AttnBlock (reference: model/audio_vae/attention.py): single-head self-attention over all
// (time, mel) positions of a [B, C, H, W] map with 1x1-conv q / k / v / proj_out and a residual.
// The released audio VAEs have none (attn_resolutions = [], mid_block_add_attention = false), but
// the code defaults enable it.
#include <string>

#include "models/audio_vae/layers.h"

namespace ltx::models::audio_vae {

struct AttnBlock {
  Norm norm;
  Conv2d q, k, v, proj_out;

  static AttnBlock load(io::WeightMap& w, const std::string& name, int64_t channels,
                        NormType norm_type, const nn::LoadOptions& opt);
  // x + proj_out(v @ softmax(q^T k / sqrt(C))^T), with q, k, v of norm(x).
  Tensor operator()(const Tensor& x) const;
};

}  // namespace ltx::models::audio_vae
