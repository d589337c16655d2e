#include "models/video_vae/attention.h"

#include <cmath>

#include "ops/attention.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace ltx::models::video_vae {

AttnBlock3D AttnBlock3D::load(io::WeightMap& w, int64_t c, const nn::LoadOptions& opt) {
  AttnBlock3D a;
  a.gamma = w.take("norm.gamma", {c, 1, 1}, opt.dtype, opt.device);
  a.qkv_weight = w.take("to_qkv.weight", {3 * c, c, 1, 1}, opt.dtype, opt.device);
  a.qkv_bias = w.take("to_qkv.bias", {3 * c}, opt.dtype, opt.device);
  a.proj_weight = w.take("proj.weight", {c, c, 1, 1}, opt.dtype, opt.device);
  a.proj_bias = w.take("proj.bias", {c}, opt.dtype, opt.device);
  return a;
}

Tensor AttnBlock3D::operator()(const Tensor& x) const {
  LTX_CHECK(x.dim() == 5 && x.size(1) == gamma.size(0), "AttnBlock3D: expected [B, ",
            gamma.size(0), ", F, H, W], got ", x.describe());
  const int64_t b = x.size(0), c = x.size(1), t = x.size(2), h = x.size(3), w = x.size(4);
  // "b c t h w -> (b t) c h w"
  Tensor f = x.permute({0, 2, 1, 3, 4}).reshape({b * t, c, h, w});
  // F.normalize(f, dim=1) * (sqrt(C) * gamma)
  Tensor norm = ops::maximum(ops::sqrt(ops::sum(ops::square(f), {1}, true)), 1e-12);
  Tensor gain = ops::mul(gamma, std::sqrt(static_cast<double>(c)));
  f = ops::mul(ops::div(f, norm), gain);
  Tensor qkv = ops::conv2d(f, qkv_weight, qkv_bias);  // [(b t), 3C, h, w]
  // "bt c h w -> bt (h w) c", then chunk along c into q, k, v (one head).
  Tensor tokens = qkv.view({b * t, 3 * c, h * w}).transpose(1, 2).unsqueeze(1);
  Tensor q = tokens.narrow(3, 0, c), k = tokens.narrow(3, c, c), v = tokens.narrow(3, 2 * c, c);
  Tensor o = ops::scaled_dot_product_attention(q, k, v);  // [(b t), 1, hw, c]
  o = o.squeeze(1).transpose(1, 2).reshape({b * t, c, h, w});
  o = ops::conv2d(o, proj_weight, proj_bias);
  // "(b t) c h w -> b c t h w"
  o = o.view({b, t, c, h, w}).permute({0, 2, 1, 3, 4});
  return ops::add(x, o);
}

}  // namespace ltx::models::video_vae
