#include "models/video_vae/transformer/attention.h"

#include <cmath>

#include "ops/elementwise.h"
#include "ops/neighborhood_attention.h"
#include "ops/norm.h"

namespace ltx::models::video_vae {

namespace {
constexpr double kEps = 1e-6;
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

NeighborhoodAttention3D::Qkv NeighborhoodAttention3D::project(
    const Tensor& y, const std::vector<float>& w_positions) const {
  LTX_CHECK(y.dim() == 5 && y.size(4) == dim, "neighborhood attention: expected [B, T, H, W, ", dim,
            "], got ", y.describe());
  const int64_t b = y.size(0), t = y.size(1), h = y.size(2), w = y.size(3);
  const Tensor fused = qkv(y);  // [B, T, H, W, 3C]
  auto heads = [&](int i) {
    return fused.narrow(4, i * dim, dim).reshape({b, t, h, w, num_heads, head_dim});
  };
  const AbsRope3d rope = abs_rope_3d(rope_split, rope_inv, t, h, w_positions);
  Qkv out;
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  out.q = apply_abs_rope_3d(ops::mul(ops::rms_norm(heads(0), q_norm, kEps), scale), rope);
  out.k = apply_abs_rope_3d(ops::rms_norm(heads(1), k_norm, kEps), rope);
  out.v = heads(2);
  return out;
}

Tensor NeighborhoodAttention3D::attend(const Qkv& x) const {
  const Tensor o = ops::neighborhood_attention_3d(x.q, x.k, x.v, kernel, 1.0);
  const Shape s = o.shape();
  return proj(o.reshape({s[0], s[1], s[2], s[3], dim}));
}

Tensor NeighborhoodAttention3D::operator()(const Tensor& y, const Probe& probe) const {
  const Qkv x = project(y, positions(y.size(3)));
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
