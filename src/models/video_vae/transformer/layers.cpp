#include "models/video_vae/transformer/layers.h"

#include "ops/elementwise.h"

namespace ltx::models::video_vae {

LinearPixelShuffleUpsample LinearPixelShuffleUpsample::load(io::WeightMap& w, int64_t in_channels,
                                                            const std::array<int64_t, 3>& stride,
                                                            int64_t reduction,
                                                            const nn::LoadOptions& opt) {
  LinearPixelShuffleUpsample u;
  u.stride = stride;
  const int64_t cells = stride[0] * stride[1] * stride[2];
  const int64_t proj_out = cells * in_channels / reduction;
  u.out_channels = proj_out / cells;
  u.proj = nn::Linear::load(w, "proj", in_channels, proj_out, true, opt);
  return u;
}

Tensor LinearPixelShuffleUpsample::shuffle(const Tensor& y, bool drop_leading_frame) const {
  const auto [p1, p2, p3] = stride;
  const int64_t b = y.size(0), t = y.size(1), h = y.size(2), w = y.size(3);
  // (c p1 p2 p3): c is the outermost factor of the channel index.
  Tensor x = y.reshape({b, t, h, w, out_channels, p1, p2, p3})
                 .permute({0, 1, 5, 2, 6, 3, 7, 4})
                 .reshape({b, t * p1, h * p2, w * p3, out_channels});
  if (p1 == 2 && drop_leading_frame) x = x.narrow(1, 1, x.size(1) - 1);
  return x;
}

Tensor LinearPixelShuffleUpsample::operator()(const Tensor& x, bool drop_leading_frame) const {
  return shuffle(proj(x), drop_leading_frame);
}

SwiGLU SwiGLU::load(io::WeightMap& w, int64_t dim, const nn::LoadOptions& opt) {
  const int64_t hidden = hidden_dim(dim);
  SwiGLU m;
  m.w_gate = nn::Linear::load(w, "w_gate", dim, hidden, false, opt);
  m.w_up = nn::Linear::load(w, "w_up", dim, hidden, false, opt);
  m.w_down = nn::Linear::load(w, "w_down", hidden, dim, false, opt);
  return m;
}

Tensor SwiGLU::operator()(const Tensor& y) const {
  return w_down(ops::mul(ops::silu(w_gate(y)), w_up(y)));
}

}  // namespace ltx::models::video_vae
