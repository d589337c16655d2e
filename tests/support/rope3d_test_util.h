#pragma once
// Inputs of the 3-D RoPE ops (ops::apply_rope_3d, ops::qk_norm_rope_3d) for the CPU and CUDA tests.
#include <array>
#include <cmath>
#include <vector>

#include "ops/rope.h"
#include "support/test_support.h"

namespace ltx::test {

// Real RoPE tables for a (d_t, d_h, d_w) split: cos / sin of pos * inv_i (f32), each angle
// repeated for its pair; T and H positions 0.., W positions from w_start (shifted, as the
// decoder's W chunks). f32 on `device`.
inline ops::Rope3dTables rope3d_tables(const std::array<int64_t, 3>& split, int64_t t, int64_t h,
                                       int64_t w, int64_t w_start,
                                       Device device = Device::cpu()) {
  ops::Rope3dTables r;
  const int64_t len[3] = {t, h, w}, first[3] = {0, 0, w_start};
  for (int a = 0; a < 3; ++a) {
    const int64_t d = split[a];
    std::vector<float> c(static_cast<size_t>(len[a] * d)), s(c.size());
    for (int64_t p = 0; p < len[a]; ++p)
      for (int64_t i = 0; i + 1 < d; i += 2) {
        const float inv = static_cast<float>(std::pow(10000.0, -static_cast<double>(i) / d));
        const float angle = static_cast<float>(p + first[a]) * inv;
        const size_t at = static_cast<size_t>(p * d + i);
        c[at] = c[at + 1] = std::cos(angle);
        s[at] = s[at + 1] = std::sin(angle);
      }
    r.cos[a] = Tensor::from_vector(c, {len[a], d}).to(device);
    r.sin[a] = Tensor::from_vector(s, {len[a], d}).to(device);
  }
  return r;
}

// q, k, v as the decoder's attention gets them: narrows of one fused projection
// [B, T, H, W, 3 heads D] (uniform in [-2, 2), `dtype` on `device`) viewed as
// [B, T, H, W, heads, D]: rows 3 heads D apart, unit last-dim stride.
inline std::array<Tensor, 3> fused_qkv_heads(const Shape& s, uint64_t seed,
                                             DType dtype = DType::F32,
                                             Device device = Device::cpu()) {
  const int64_t c = s[4] * s[5];
  const Tensor fused =
      random_tensor({s[0], s[1], s[2], s[3], 3 * c}, seed, -2.f, 2.f).to(device, dtype);
  std::array<Tensor, 3> out;
  for (int i = 0; i < 3; ++i) out[i] = fused.narrow(4, i * c, c).view(s);
  return out;
}

}  // namespace ltx::test
