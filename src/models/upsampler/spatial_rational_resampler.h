#pragma once
// Rational spatial resampling of the latent upsampler (reference:
// model/upsampler/spatial_rational_resampler.py, blur_downsample.py): per frame,
// Conv2d(mid -> num^2 mid) -> PixelShuffle(num) -> BlurDownsample(stride den).
#include <cstdint>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/upsampler/res_block.h"
#include "nn/module.h"

namespace ltx::models::upsampler {

// Depthwise blur with the fixed 5x5 binomial kernel (1,4,6,4,1)^T (1,4,6,4,1) / 256, stride
// `stride`, zero padding 2, per frame; stride 1 is the identity. The kernel is the file's
// `kernel` buffer [1, 1, 5, 5] (the reference registers it as a persistent buffer).
struct BlurDownsample {
  Tensor kernel;  // [1, 1, k, k]
  int64_t stride = 1;
  static BlurDownsample load(io::WeightMap& w, int64_t stride, const nn::LoadOptions& opt);
  // The binomial kernel of size k as the reference builds it (for tests and checks).
  static Tensor binomial_kernel(int64_t k = 5);
  // x [B, C, F, H, W].
  Tensor operator()(const Tensor& x) const;
};

// Binds `conv.{weight,bias}` (Conv2d, [num^2 mid, mid, 3, 3]) and `blur_down.kernel`.
struct SpatialRationalResampler {
  Conv conv;
  BlurDownsample blur_down;
  int64_t num = 2, den = 1;
  static SpatialRationalResampler load(io::WeightMap& w, int64_t mid_channels, double scale,
                                       const nn::LoadOptions& opt);
  // x [B, mid, F, H, W] -> [B, mid, F, ceil(H num / den), ...] (exactly H * scale for the scales
  // used).
  Tensor operator()(const Tensor& x) const;
};

}  // namespace ltx::models::upsampler
