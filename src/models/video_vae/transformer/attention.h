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
#include "ops/neighborhood_attention.h"

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
  // The RoPE tables of a grid (T and H positions 0.., the given W positions) on `device`. Build
  // them once per grid and pass them to every block that runs on it (the tables of one stage, or
  // of one W chunk of stage 5, are the same for all of its blocks).
  AbsRope3d rope_tables(int64_t t, int64_t h, const std::vector<float>& w_positions,
                        Device device) const;
  // Projections of y [B, T, H, W, C] with y's grid's tables: the q / k norms, q's scale and the
  // RoPE in one op (ops::qk_norm_rope_3d).
  Qkv project(const Tensor& y, const AbsRope3d& rope) const;
  // The same through the unfused ops (rms_norm, mul, apply_rope_3d): the tests' reference,
  // bit-identical to project on each device.
  Qkv project_unfused(const Tensor& y, const AbsRope3d& rope) const;
  // proj(neighborhood attention of qkv) -> [B, T, H, W, C].
  // cols: the query columns to attend (the output has only those; keys and windows span the
  // whole W).
  Tensor attend(const Qkv& qkv, const ops::QueryColumns& cols = {}) const;
  // The full-volume call: W positions 0..W-1, with those tables or (null) tables built here.
  // Probe names: q, k, v (as attended), out (the attention output [B, T, H, W, heads,
  // head_dim]), y (after proj).
  Tensor operator()(const Tensor& y, const Probe& probe = {},
                    const AbsRope3d* rope = nullptr) const;
};

}  // namespace ltx::models::video_vae
