#include "models/video_vae/transformer/layers.h"

#include <algorithm>

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
  const auto mlp = [&](const Tensor& x) { return w_down(ops::mul(ops::silu(w_gate(x)), w_up(x))); };
  const int64_t dim = y.size(-1), rows = dim > 0 ? y.numel() / dim : 0;
  const int64_t hidden = w_gate.weight.size(0);
  const int64_t chunk = std::max<int64_t>(1, max_hidden_elements / std::max<int64_t>(hidden, 1));
  if (rows <= chunk) return mlp(y);
  const Tensor flat = y.reshape({rows, dim});
  Tensor out;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    const Tensor part = mlp(flat.narrow(0, r0, n));
    if (!out.defined()) out = Tensor::empty({rows, part.size(1)}, part.dtype(), part.device());
    out.narrow(0, r0, n).copy_from(part);
  }
  Shape shape = y.shape();
  shape[shape.size() - 1] = out.size(1);
  return out.view(shape);
}

}  // namespace ltx::models::video_vae
