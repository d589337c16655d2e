#pragma once
// AttnBlock3D (reference: model/video_vae/attention.py): single-head spatial self-attention per
// frame, used by `attn` blocks (no published LTX-2.x conv VAE has one).
#include <cstdint>

#include "core/tensor.h"
#include "io/weights.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

// x + proj(attn(q, k, v)) with q, k, v = to_qkv(norm(x)) over the H*W positions of each frame,
// one head of width C (scale 1/sqrt(C)). norm = F.normalize over channels (x / max(|x|_2, 1e-12))
// times sqrt(C) * gamma. Binds norm.gamma [C, 1, 1], to_qkv.{weight [3C, C, 1, 1], bias},
// proj.{weight [C, C, 1, 1], bias}.
struct AttnBlock3D {
  Tensor gamma;               // [C, 1, 1]
  Tensor qkv_weight, qkv_bias;
  Tensor proj_weight, proj_bias;

  static AttnBlock3D load(io::WeightMap& w, int64_t channels, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

}  // namespace ltx::models::video_vae
