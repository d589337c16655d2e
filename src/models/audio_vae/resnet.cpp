#include "models/audio_vae/resnet.h"

#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace ltx::models::audio_vae {

ResnetBlock ResnetBlock::load(io::WeightMap& w, const std::string& name, int64_t in, int64_t out,
                              NormType norm, CausalityAxis axis, const nn::LoadOptions& opt) {
  ResnetBlock b;
  b.in_channels = in;
  b.out_channels = out;
  b.norm1 = Norm::load(w, name + ".norm1", in, norm, opt);
  b.conv1 = CausalConv2d::load(w, name + ".conv1", in, out, 3, axis, opt);
  b.norm2 = Norm::load(w, name + ".norm2", out, norm, opt);
  b.conv2 = CausalConv2d::load(w, name + ".conv2", out, out, 3, axis, opt);
  if (in != out) b.nin_shortcut = CausalConv2d::load(w, name + ".nin_shortcut", in, out, 1, axis, opt);
  return b;
}

Tensor ResnetBlock::operator()(const Tensor& x) const {
  Tensor h = conv1(ops::silu(norm1(x)));
  h = conv2(ops::silu(norm2(h)));  // dropout is the identity at inference
  const Tensor skip = nin_shortcut ? (*nin_shortcut)(x) : x;
  return ops::add(skip, h);
}

Tensor leaky_relu(const Tensor& x, double slope) { return ops::maximum(x, ops::mul(x, slope)); }

Tensor conv1d_same(const Conv1d& conv, const Tensor& x) {
  const int64_t k = conv.weight.size(2), total = conv.dilation * (k - 1);
  const int64_t left = total / 2, right = total - left;
  if (left == right) return ops::conv1d(x, conv.weight, conv.bias, {1}, {left}, {conv.dilation});
  return ops::conv1d(ops::pad(x, {left, right}), conv.weight, conv.bias, {1}, {0},
                     {conv.dilation});
}

ResBlock1 ResBlock1::load(io::WeightMap& w, const std::string& name, int64_t channels,
                          int64_t kernel, const std::vector<int64_t>& dilation,
                          const nn::LoadOptions& opt) {
  ResBlock1 b;
  for (int i = 0; i < 3; ++i) {
    b.convs1[i] = Conv1d::load(w, str(name, ".convs1.", i), channels, channels, kernel, true, opt);
    b.convs1[i].dilation = dilation.at(i);
    b.convs2[i] = Conv1d::load(w, str(name, ".convs2.", i), channels, channels, kernel, true, opt);
  }
  return b;
}

Tensor ResBlock1::operator()(const Tensor& x_in) const {
  Tensor x = x_in;
  for (int i = 0; i < 3; ++i) {
    Tensor t = conv1d_same(convs1[i], leaky_relu(x, kSlope));
    t = conv1d_same(convs2[i], leaky_relu(t, kSlope));
    x = ops::add(t, x);
  }
  return x;
}

}  // namespace ltx::models::audio_vae
