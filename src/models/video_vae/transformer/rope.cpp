#include "models/video_vae/transformer/rope.h"

#include <cmath>

namespace ltx::models::video_vae {

RopeDimSplit default_rope_dim_split(int64_t head_dim) {
  LTX_CHECK(head_dim > 0 && head_dim % 8 == 0, "diffusion decoder: head_dim ", head_dim,
            " must be a positive multiple of 8 for the default RoPE split");
  int64_t d_t = (head_dim / 4) / 2 * 2;
  int64_t d_hw = (head_dim - d_t) / 2;
  if (d_hw % 2 != 0) {
    d_t -= 2;
    d_hw = (head_dim - d_t) / 2;
  }
  return {d_t, d_hw, d_hw};
}

Tensor rope_inv_freqs(int64_t dim, double base) {
  LTX_CHECK(dim > 0 && dim % 2 == 0, "diffusion decoder: RoPE chunk size must be even, got ", dim);
  std::vector<float> inv;
  for (int64_t i = 0; i < dim; i += 2)
    inv.push_back(static_cast<float>(1.0 / std::pow(base, static_cast<double>(i) / dim)));
  return Tensor::from_vector(inv, {dim / 2});
}

AxisRope axis_rope(const std::vector<float>& pos, const Tensor& inv) {
  const auto f = inv.to_float_vector();
  const int64_t n = static_cast<int64_t>(pos.size()), d = 2 * static_cast<int64_t>(f.size());
  std::vector<float> c(static_cast<size_t>(n * d)), s(c.size());
  for (int64_t p = 0; p < n; ++p)
    for (size_t i = 0; i < f.size(); ++i) {
      const float angle = pos[p] * f[i];  // f32 product, as the reference
      const float ci = static_cast<float>(std::cos(static_cast<double>(angle)));
      const float si = static_cast<float>(std::sin(static_cast<double>(angle)));
      const size_t at = static_cast<size_t>(p * d) + 2 * i;
      c[at] = c[at + 1] = ci;
      s[at] = s[at + 1] = si;
    }
  return {Tensor::from_vector(c, {n, d}), Tensor::from_vector(s, {n, d})};
}

std::vector<float> positions(int64_t n, int64_t offset) {
  std::vector<float> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i + offset);
  return p;
}

AbsRope3d abs_rope_3d(const std::array<Tensor, 3>& inv, int64_t t_len, int64_t h_len,
                      const std::vector<float>& w_positions, Device device) {
  const std::vector<float> pos[3] = {positions(t_len), positions(h_len), w_positions};
  AbsRope3d r;
  for (int a = 0; a < 3; ++a) {
    const AxisRope t = axis_rope(pos[a], inv[a]);
    r.cos[a] = t.cos.to(device);
    r.sin[a] = t.sin.to(device);
  }
  return r;
}

}  // namespace ltx::models::video_vae
