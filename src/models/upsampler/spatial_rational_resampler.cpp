#include "models/upsampler/spatial_rational_resampler.h"

#include "models/upsampler/model_configurator.h"
#include "ops/conv.h"
#include "ops/resample.h"
#include "ops/shape.h"

namespace ltx::models::upsampler {

Tensor BlurDownsample::binomial_kernel(int64_t k) {
  LTX_CHECK(k >= 3 && k % 2 == 1, "BlurDownsample: kernel size must be odd and >= 3, got ", k);
  std::vector<double> row(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) {
    double c = 1;
    for (int64_t j = 0; j < i; ++j) c = c * static_cast<double>(k - 1 - j) / static_cast<double>(j + 1);
    row[i] = c;
  }
  double total = 0;
  for (double a : row)
    for (double b : row) total += a * b;
  std::vector<float> v;
  for (double a : row)
    for (double b : row) v.push_back(static_cast<float>(a * b / total));
  return Tensor::from_vector(v, {1, 1, k, k});
}

BlurDownsample BlurDownsample::load(io::WeightMap& w, int64_t stride, const nn::LoadOptions& opt) {
  LTX_CHECK(stride >= 1, "BlurDownsample: stride must be >= 1, got ", stride);
  BlurDownsample b;
  b.stride = stride;
  b.kernel = w.take("kernel", {1, 1, 5, 5}, opt.dtype, opt.device);
  return b;
}

Tensor BlurDownsample::operator()(const Tensor& x) const {
  if (stride == 1) return x;
  const int64_t c = x.size(1), k = kernel.size(-1);
  // Depthwise: the one kernel for every channel, as [C, 1, 1, k, k] over (f, h, w).
  Tensor weight = kernel.reshape({1, 1, 1, k, k}).expand({c, 1, 1, k, k}).contiguous();
  return ops::conv3d(x, weight, Tensor(), {1, stride, stride}, {0, k / 2, k / 2}, {1, 1, 1}, c);
}

SpatialRationalResampler SpatialRationalResampler::load(io::WeightMap& w, int64_t mid_channels,
                                                        double scale, const nn::LoadOptions& opt) {
  SpatialRationalResampler r;
  std::tie(r.num, r.den) = rational_for_scale(scale);
  r.conv = Conv::load(w, "conv", mid_channels, r.num * r.num * mid_channels, 3, 2, opt);
  io::WeightMap bw = w.scoped("blur_down.");
  r.blur_down = BlurDownsample::load(bw, r.den, opt);
  return r;
}

Tensor SpatialRationalResampler::operator()(const Tensor& x) const {
  // PixelShuffleND(2): "b (c p1 p2) h w -> b c (h p1) (w p2)", per frame.
  Tensor y = ops::depth_to_space(conv(x), {1, num, num}, {0, 1, 2});
  return blur_down(y);
}

}  // namespace ltx::models::upsampler
