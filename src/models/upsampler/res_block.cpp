#include "models/upsampler/res_block.h"

#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/norm.h"

namespace ltx::models::upsampler {

Conv Conv::load(io::WeightMap& w, const std::string& name, int64_t in_channels,
                int64_t out_channels, int64_t kernel, int dims, const nn::LoadOptions& opt) {
  Conv c;
  if (dims == 3) {
    c.weight = w.take(name + ".weight", {out_channels, in_channels, kernel, kernel, kernel},
                      opt.dtype, opt.device);
  } else {
    c.weight = w.take(name + ".weight", {out_channels, in_channels, kernel, kernel}, opt.dtype,
                      opt.device);
    if (c.weight.defined()) c.weight = c.weight.unsqueeze(2);
  }
  c.bias = w.take(name + ".bias", {out_channels}, opt.dtype, opt.device);
  return c;
}

Tensor Conv::operator()(const Tensor& x) const {
  const int64_t kt = weight.size(2), kh = weight.size(3), kw = weight.size(4);
  return ops::conv3d(x, weight, bias, {1, 1, 1}, {kt / 2, kh / 2, kw / 2});
}

Tensor group_norm_32(const Tensor& x, const Tensor& weight, const Tensor& bias, bool per_frame) {
  constexpr double kEps = 1e-5;
  if (!per_frame) return ops::group_norm(x, 32, weight, bias, kEps);
  // "b c f h w -> (b f) c h w", normalise, and back.
  const int64_t b = x.size(0), c = x.size(1), f = x.size(2), h = x.size(3), w = x.size(4);
  Tensor frames = x.permute({0, 2, 1, 3, 4}).reshape({b * f, c, h, w});
  Tensor y = ops::group_norm(frames, 32, weight, bias, kEps);
  return y.view({b, f, c, h, w}).permute({0, 2, 1, 3, 4}).contiguous();
}

ResBlock ResBlock::load(io::WeightMap& w, int64_t channels, int dims, const nn::LoadOptions& opt) {
  ResBlock r;
  r.per_frame = dims == 2;
  r.conv1 = Conv::load(w, "conv1", channels, channels, 3, dims, opt);
  r.norm1_weight = w.take("norm1.weight", {channels}, opt.dtype, opt.device);
  r.norm1_bias = w.take("norm1.bias", {channels}, opt.dtype, opt.device);
  r.conv2 = Conv::load(w, "conv2", channels, channels, 3, dims, opt);
  r.norm2_weight = w.take("norm2.weight", {channels}, opt.dtype, opt.device);
  r.norm2_bias = w.take("norm2.bias", {channels}, opt.dtype, opt.device);
  return r;
}

Tensor ResBlock::operator()(const Tensor& x) const {
  Tensor h = ops::silu(group_norm_32(conv1(x), norm1_weight, norm1_bias, per_frame));
  h = group_norm_32(conv2(h), norm2_weight, norm2_bias, per_frame);
  ops::add_(h, x);
  return ops::silu(h);
}

}  // namespace ltx::models::upsampler
