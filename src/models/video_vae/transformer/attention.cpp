#include "models/video_vae/transformer/attention.h"

#include <array>
#include <cmath>

#include "ops/neighborhood_attention.h"
#include "ops/rope.h"

namespace ltx::models::video_vae {

namespace {
constexpr double kQkNormEps = 1e-6;
}

NeighborhoodAttention3D NeighborhoodAttention3D::load(io::WeightMap& w, int64_t dim,
                                                      const Kernel3& kernel, int64_t head_dim,
                                                      const nn::LoadOptions& opt) {
  LTX_CHECK(head_dim > 0 && dim % head_dim == 0, "diffusion decoder: attention width ", dim,
            " is not a multiple of head_dim ", head_dim);
  NeighborhoodAttention3D a;
  a.dim = dim;
  a.head_dim = head_dim;
  a.num_heads = dim / head_dim;
  a.kernel = kernel;
  a.rope_split = default_rope_dim_split(head_dim);
  for (int i = 0; i < 3; ++i) a.rope_inv[i] = rope_inv_freqs(a.rope_split[i]);
  a.qkv = nn::Linear::load(w, "qkv", dim, 3 * dim, true, opt);
  a.proj = nn::Linear::load(w, "proj", dim, dim, true, opt);
  a.q_norm = w.take("q_norm.weight", {head_dim}, opt.dtype, opt.device);
  a.k_norm = w.take("k_norm.weight", {head_dim}, opt.dtype, opt.device);
  return a;
}

AbsRope3d NeighborhoodAttention3D::rope_tables(int64_t t, int64_t h,
                                               const std::vector<float>& w_positions,
                                               Device device) const {
  return abs_rope_3d(rope_inv, t, h, w_positions, device);
}

namespace {

// q, k, v views [B, T, H, W, heads, head_dim] of the fused projection of y.
std::array<Tensor, 3> qkv_heads(const NeighborhoodAttention3D& a, const Tensor& y) {
  LTX_CHECK(y.dim() == 5 && y.size(4) == a.dim, "neighborhood attention: expected [B, T, H, W, ",
            a.dim, "], got ", y.describe());
  const Tensor fused = a.qkv(y);  // [B, T, H, W, 3C]
  std::array<Tensor, 3> out;
  for (int i = 0; i < 3; ++i)
    out[i] = fused.narrow(4, i * a.dim, a.dim)
                 .reshape({y.size(0), y.size(1), y.size(2), y.size(3), a.num_heads, a.head_dim});
  return out;
}

double q_scale(const NeighborhoodAttention3D& a) {
  return 1.0 / std::sqrt(static_cast<double>(a.head_dim));
}

}  // namespace

NeighborhoodAttention3D::Qkv NeighborhoodAttention3D::project(const Tensor& y,
                                                              const AbsRope3d& rope) const {
  // In place on the fused projection: its q / k parts are dead once normalised and rotated.
  const auto h = qkv_heads(*this, y);
  ops::qk_norm_rope_3d_(h[0], h[1], q_norm, k_norm, kQkNormEps, q_scale(*this), rope);
  return {h[0], h[1], h[2]};
}

NeighborhoodAttention3D::Qkv NeighborhoodAttention3D::project_unfused(const Tensor& y,
                                                                      const AbsRope3d& rope) const {
  const auto h = qkv_heads(*this, y);
  const ops::QkRope qk =
      ops::qk_norm_rope_3d_unfused(h[0], h[1], q_norm, k_norm, kQkNormEps, q_scale(*this), rope);
  return {qk.q, qk.k, h[2]};
}

Tensor NeighborhoodAttention3D::attend(const Qkv& x, const ops::QueryColumns& cols) const {
  const Tensor o = ops::neighborhood_attention_3d(x.q, x.k, x.v, kernel, 1.0, cols);
  const Shape s = o.shape();
  return proj(o.reshape({s[0], s[1], s[2], s[3], dim}));
}

Tensor NeighborhoodAttention3D::operator()(const Tensor& y, const Probe& probe,
                                           const AbsRope3d* rope) const {
  LTX_CHECK(y.dim() == 5, "neighborhood attention: expected [B, T, H, W, ", dim, "], got ",
            y.describe());
  const Qkv x = project(
      y, rope != nullptr ? *rope
                         : rope_tables(y.size(1), y.size(2), positions(y.size(3)), y.device()));
  if (!probe) return attend(x);
  probe("q", x.q);
  probe("k", x.k);
  probe("v", x.v);
  const Tensor o = ops::neighborhood_attention_3d(x.q, x.k, x.v, kernel, 1.0);
  probe("out", o);
  const Shape s = o.shape();
  const Tensor out = proj(o.reshape({s[0], s[1], s[2], s[3], dim}));
  probe("y", out);
  return out;
}

}  // namespace ltx::models::video_vae
