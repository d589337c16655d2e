#pragma once
// Absolute 3-D rotary embedding of the diffusion decoder's neighborhood attention (reference:
// model/video_vae/transformer/rope_math.py, rope.py).
//
// The head dim is split into (d_t, d_h, d_w) chunks (default_rope_dim_split: 16 -> (4, 6, 6),
// 64 -> (16, 24, 24)); each chunk rotates interleaved pairs (x[2i], x[2i+1]) by pos * inv_i along
// its axis, with inv_i = base^(-2i/d) computed in float64 and rounded to f32, and the angle,
// cos and sin in f32. Positions are the tensor's local indices along T and H and the given
// (possibly shifted) positions along W. The rotation itself is ops::apply_rope_3d, or fused with
// the q / k norms: ops::qk_norm_rope_3d.
#include <array>
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ops/rope.h"

namespace ltx::models::video_vae {

using RopeDimSplit = std::array<int64_t, 3>;  // (d_t, d_h, d_w)

// (d_t, d_h, d_w) with d_t = (head_dim / 4) rounded down to even and equal even H/W chunks.
// head_dim must be a multiple of 8.
RopeDimSplit default_rope_dim_split(int64_t head_dim);

// 1 / base^(i / dim) for i = 0, 2, ..., dim - 2, in float64 rounded to f32: [dim / 2].
Tensor rope_inv_freqs(int64_t dim, double base = 10000.0);

// cos / sin of pos * inv for one axis, each angle repeated for both members of its pair (the
// interleaved layout of ops::apply_rope): [positions, 2 * inv.size(0)] f32.
struct AxisRope {
  Tensor cos, sin;
};
AxisRope axis_rope(const std::vector<float>& positions, const Tensor& inv);

// The tables of one attention grid (ops::Rope3dTables: cos / sin per axis) on `device`: T and H
// positions 0.., W positions as given. Built once per grid and shared by the blocks that run on
// it (see NeighborhoodAttention3D::project).
using AbsRope3d = ops::Rope3dTables;
AbsRope3d abs_rope_3d(const std::array<Tensor, 3>& inv, int64_t t_len, int64_t h_len,
                      const std::vector<float>& w_positions, Device device = Device::cpu());

// 0, 1, ..., n - 1 (+ offset) as floats.
std::vector<float> positions(int64_t n, int64_t offset = 0);

}  // namespace ltx::models::video_vae
