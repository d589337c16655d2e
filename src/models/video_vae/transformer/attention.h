#pragma once
// NeighborhoodAttention3D of the diffusion video decoder (reference:
// model/video_vae/transformer/attention.py, qkv.py, det_attn_rope.py, fallback_na/eager.py).
//
// y [B, T, H, W, C] -> fused qkv projection (rows q | k | v) -> per head: q = rms(q) * q_norm *
// head_dim^-1/2, k = rms(k) * k_norm -> absolute 3-D RoPE -> neighborhood attention over a
// (Kt, Kh, Kw) window (ops::neighborhood_attention_3d) -> proj.
#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/video_vae/transformer/rope.h"
#include "models/video_vae/video_vae.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

using Kernel3 = std::array<int64_t, 3>;  // (Kt, Kh, Kw)

struct NeighborhoodAttention3D {
  nn::Linear qkv;  // [3C, C], rows q | k | v (the checkpoints' fused layout)
  nn::Linear proj;
  Tensor q_norm, k_norm;  // [head_dim]
  int64_t dim = 0, num_heads = 0, head_dim = 0;
  Kernel3 kernel{};
  RopeDimSplit rope_split{};
  std::array<Tensor, 3> rope_inv;  // inv freqs of the t, h, w chunks

  static NeighborhoodAttention3D load(io::WeightMap& w, int64_t dim, const Kernel3& kernel,
                                      int64_t head_dim, const nn::LoadOptions& opt);

  struct Qkv {
    Tensor q, k, v;  // [B, T, H, W, heads, head_dim]; q and k normed, scaled (q) and rotated
  };
  // Projections of y [B, T, H, W, C], RoPE with T / H positions 0.. and the given W positions.
  Qkv project(const Tensor& y, const std::vector<float>& w_positions) const;
  // proj(neighborhood attention of qkv) -> [B, T, H, W, C].
  Tensor attend(const Qkv& qkv) const;
  // The full-volume call: W positions 0..W-1. Probe names: q, k, v (as attended), out (the
  // attention output [B, T, H, W, heads, head_dim]), y (after proj).
  Tensor operator()(const Tensor& y, const Probe& probe = {}) const;
};

}  // namespace ltx::models::video_vae
