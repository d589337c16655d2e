#include "models/audio_vae/layers.h"

#include "ops/conv.h"
#include "ops/norm.h"
#include "ops/shape.h"

namespace ltx::models::audio_vae {

Conv1d Conv1d::load(io::WeightMap& w, const std::string& name, int64_t in, int64_t out,
                    int64_t kernel, bool has_bias, const nn::LoadOptions& opt) {
  Conv1d c;
  c.weight = w.take(name + ".weight", {out, in, kernel}, opt.dtype, opt.device);
  if (has_bias) c.bias = w.take(name + ".bias", {out}, opt.dtype, opt.device);
  return c;
}

Tensor Conv1d::operator()(const Tensor& x) const {
  return ops::conv1d(x, weight, bias, {stride}, {padding}, {dilation});
}

ConvTranspose1d ConvTranspose1d::load(io::WeightMap& w, const std::string& name, int64_t in,
                                      int64_t out, int64_t kernel, const nn::LoadOptions& opt) {
  ConvTranspose1d c;
  c.weight = w.take(name + ".weight", {in, out, kernel}, opt.dtype, opt.device);
  c.bias = w.take(name + ".bias", {out}, opt.dtype, opt.device);
  return c;
}

Tensor ConvTranspose1d::operator()(const Tensor& x) const {
  return ops::conv_transpose1d(x, weight, bias, {stride}, {padding});
}

Conv2d Conv2d::load(io::WeightMap& w, const std::string& name, int64_t in, int64_t out,
                    int64_t kernel, const nn::LoadOptions& opt) {
  Conv2d c;
  c.weight = w.take(name + ".weight", {out, in, kernel, kernel}, opt.dtype, opt.device);
  c.bias = w.take(name + ".bias", {out}, opt.dtype, opt.device);
  return c;
}

Tensor Conv2d::operator()(const Tensor& x) const {
  return ops::conv2d(x, weight, bias, stride, padding);
}

CausalConv2d CausalConv2d::load(io::WeightMap& w, const std::string& name, int64_t in,
                                int64_t out, int64_t kernel, CausalityAxis axis,
                                const nn::LoadOptions& opt) {
  CausalConv2d c;
  c.conv = Conv2d::load(w, name + ".conv", in, out, kernel, opt);
  const int64_t p = kernel - 1;  // dilation 1 everywhere in this model
  switch (axis) {
    case CausalityAxis::None: c.pad = {p / 2, p - p / 2, p / 2, p - p / 2}; break;
    case CausalityAxis::Width:
    case CausalityAxis::WidthCompatibility: c.pad = {p, 0, p / 2, p - p / 2}; break;
    case CausalityAxis::Height: c.pad = {p / 2, p - p / 2, p, 0}; break;
  }
  return c;
}

Tensor CausalConv2d::operator()(const Tensor& x) const {
  if (pad == std::array<int64_t, 4>{0, 0, 0, 0}) return conv(x);
  return conv(ops::pad(x, {pad[0], pad[1], pad[2], pad[3]}));
}

Norm Norm::load(io::WeightMap& w, const std::string& name, int64_t channels, NormType type,
                const nn::LoadOptions& opt) {
  Norm n;
  n.type = type;
  if (type == NormType::Group) {
    LTX_CHECK(channels % kGroups == 0, "audio VAE: GroupNorm(", kGroups, ") at '", w.prefix(),
              name, "' needs a channel count divisible by ", kGroups, ", got ", channels);
    n.weight = w.take(name + ".weight", {channels}, opt.dtype, opt.device);
    n.bias = w.take(name + ".bias", {channels}, opt.dtype, opt.device);
  }
  return n;
}

Tensor Norm::operator()(const Tensor& x) const {
  if (type == NormType::Pixel) return ops::rms_norm_dim(x, 1, kEps);
  return ops::group_norm(x, kGroups, weight, bias, kEps);
}

}  // namespace ltx::models::audio_vae
