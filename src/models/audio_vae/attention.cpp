#include "models/audio_vae/attention.h"

#include <cmath>

#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"

namespace ltx::models::audio_vae {

AttnBlock AttnBlock::load(io::WeightMap& w, const std::string& name, int64_t channels,
                          NormType norm_type, const nn::LoadOptions& opt) {
  AttnBlock a;
  a.norm = Norm::load(w, name + ".norm", channels, norm_type, opt);
  a.q = Conv2d::load(w, name + ".q", channels, channels, 1, opt);
  a.k = Conv2d::load(w, name + ".k", channels, channels, 1, opt);
  a.v = Conv2d::load(w, name + ".v", channels, channels, 1, opt);
  a.proj_out = Conv2d::load(w, name + ".proj_out", channels, channels, 1, opt);
  return a;
}

Tensor AttnBlock::operator()(const Tensor& x) const {
  const Tensor h = norm(x);
  const int64_t b = x.size(0), c = x.size(1), hh = x.size(2), ww = x.size(3);
  const Tensor qm = q(h).reshape({b, c, hh * ww}).transpose(1, 2);  // [B, HW, C]
  const Tensor km = k(h).reshape({b, c, hh * ww});                  // [B, C, HW]
  const Tensor vm = v(h).reshape({b, c, hh * ww});                  // [B, C, HW]
  // w[b, i, j] = softmax_j(sum_c q[b, i, c] k[b, c, j] * c^-0.5)
  const Tensor wts = ops::softmax(ops::mul(ops::matmul(qm, km), std::pow(double(c), -0.5)), 2);
  const Tensor out = ops::matmul(vm, wts.transpose(1, 2)).reshape({b, c, hh, ww});
  return ops::add(x, proj_out(out));
}

}  // namespace ltx::models::audio_vae
