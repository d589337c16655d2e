#include "models/video_vae/convolution.h"

#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/resample.h"
#include "ops/shape.h"

namespace ltx::models::video_vae {

CausalConv3d CausalConv3d::load(io::WeightMap& w, const std::string& name, int64_t in_channels,
                                int64_t out_channels, int64_t kernel,
                                std::array<int64_t, 3> stride, PaddingMode spatial_padding,
                                const nn::LoadOptions& opt) {
  CausalConv3d c;
  c.kernel = kernel;
  c.stride = stride;
  c.spatial_padding = spatial_padding;
  const std::string p = name.empty() ? "conv." : name + ".conv.";
  c.weight = w.take(p + "weight", {out_channels, in_channels, kernel, kernel, kernel}, opt.dtype,
                    opt.device);
  c.bias = w.take(p + "bias", {out_channels}, opt.dtype, opt.device);
  // cuDNN's bf16 convs read filters channels-last ([out, k, k, k, in]); storing them that way once
  // saves a weight copy per call. Logically still [out, in, k, k, k].
  if (opt.device.is_cuda() && opt.dtype == DType::BF16) c.weight = c.weight.to_channels_last();
  return c;
}

void CausalConv3d::permute_output_channels(int64_t F) {
  const bool last = weight.is_channels_last() && !weight.is_contiguous();
  weight = ops::permute_depth_channels(weight, F);
  if (last) weight = weight.to_channels_last();
  bias = ops::permute_depth_channels(bias, F);
}

Tensor CausalConv3d::operator()(Tensor x, bool causal, const Tensor& residual) const {
  return run(std::move(x), causal, bias, residual);
}

Tensor CausalConv3d::unbiased(Tensor x, bool causal) const {
  return run(std::move(x), causal, Tensor(), Tensor());
}

Tensor CausalConv3d::run(Tensor x, bool causal, const Tensor& b, const Tensor& residual) const {
  LTX_CHECK(x.dim() == 5 && x.size(1) == in_channels(), "CausalConv3d: expected [B, ",
            in_channels(), ", F, H, W], got ", x.describe());
  const int64_t k = kernel, half = k / 2;
  // Temporal padding by frame replication, then the spatial padding of the conv's padding_mode.
  const int64_t front = causal ? k - 1 : (k - 1) / 2, back = causal ? 0 : (k - 1) / 2;
  if (spatial_padding == PaddingMode::Zeros || half == 0) {
    // One op: on CUDA (bf16) the replicated frames are folded into the conv, no padded copy.
    return ops::conv3d_replicate_time(std::move(x), weight, b, {stride[0], stride[1], stride[2]},
                                      {half, half}, front, back, residual);
  }
  Tensor xp = ops::pad(x, {0, 0, 0, 0, front, back}, ops::PadMode::Replicate);
  x = Tensor();  // the padded copy is all the conv needs
  xp = ops::pad(xp, {half, half, half, half, 0, 0}, to_pad_mode(spatial_padding));
  Tensor out = ops::conv3d(xp, weight, b, {stride[0], stride[1], stride[2]}, {0, 0, 0});
  if (residual.defined()) ops::add_(out, residual);
  return out;
}

PointwiseConv3d PointwiseConv3d::load(io::WeightMap& w, const std::string& name,
                                      int64_t in_channels, int64_t out_channels,
                                      const nn::LoadOptions& opt) {
  PointwiseConv3d c;
  c.weight = w.take(name + ".weight", {out_channels, in_channels, 1, 1, 1}, opt.dtype, opt.device);
  c.bias = w.take(name + ".bias", {out_channels}, opt.dtype, opt.device);
  return c;
}

Tensor PointwiseConv3d::operator()(const Tensor& x) const { return ops::conv3d(x, weight, bias); }

}  // namespace ltx::models::video_vae
