#include "models/video_vae/ops.h"

#include "ops/elementwise.h"
#include "ops/resample.h"

namespace ltx::models::video_vae {

namespace {
void check_5d(const Tensor& x, const char* what) {
  LTX_CHECK(x.dim() == 5, "video VAE ", what, ": expected [B, C, F, H, W], got ", x.describe());
}

// The statistics as [1, C, 1, ...] for a tensor of x's rank.
Tensor per_channel(const Tensor& v, const Tensor& x) {
  LTX_CHECK(x.dim() >= 2 && x.size(1) == v.size(0), "per-channel statistics: ", v.size(0),
            " channels for ", x.describe());
  std::vector<int64_t> dims(x.dim(), 1);
  dims[1] = v.size(0);
  return v.view(Shape(dims));
}
}  // namespace

Tensor patchify(const Tensor& x, int64_t patch_hw, int64_t patch_t) {
  if (patch_hw == 1 && patch_t == 1) return x;
  check_5d(x, "patchify");
  // Channel digits (p, r, q) = axes (frames, width, height) of the spatial dims (f, h, w).
  return ops::space_to_depth(x, {patch_t, patch_hw, patch_hw}, {0, 2, 1});
}

Tensor unpatchify(const Tensor& x, int64_t patch_hw, int64_t patch_t) {
  if (patch_hw == 1 && patch_t == 1) return x;
  check_5d(x, "unpatchify");
  return ops::depth_to_space(x, {patch_t, patch_hw, patch_hw}, {0, 2, 1});
}

PerChannelStatistics PerChannelStatistics::load(io::WeightMap& w, int64_t channels,
                                                const nn::LoadOptions& opt) {
  PerChannelStatistics s;
  s.mean_of_means = w.take("mean-of-means", {channels}, opt.dtype, opt.device);
  s.std_of_means = w.take("std-of-means", {channels}, opt.dtype, opt.device);
  return s;
}

Tensor PerChannelStatistics::un_normalize(const Tensor& x) const {
  return ops::add(ops::mul(x, per_channel(std_of_means, x)), per_channel(mean_of_means, x));
}

Tensor PerChannelStatistics::normalize(const Tensor& x) const {
  return ops::div(ops::sub(x, per_channel(mean_of_means, x)), per_channel(std_of_means, x));
}

}  // namespace ltx::models::video_vae
