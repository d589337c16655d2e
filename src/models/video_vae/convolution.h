#pragma once
// The video VAE's 3-D convolutions (reference: model/video_vae/convolution.py).
#include <array>
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/video_vae/model_configurator.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

// CausalConv3d: a cubic kernel k with spatial padding k/2 in `spatial_padding` mode and no
// temporal padding of its own; the input is padded in time by replicating frames: causal = k-1
// copies of the first frame in front; non-causal = (k-1)/2 copies of the first frame in front and
// of the last frame behind. Binds `<name>.conv.{weight,bias}` (the nn.Conv3d inside; just
// `conv.*` for an empty name).
struct CausalConv3d {
  Tensor weight;  // [out, in, k, k, k]
  Tensor bias;    // [out]
  int64_t kernel = 3;
  std::array<int64_t, 3> stride{1, 1, 1};
  PaddingMode spatial_padding = PaddingMode::Zeros;

  static CausalConv3d load(io::WeightMap& w, const std::string& name, int64_t in_channels,
                           int64_t out_channels, int64_t kernel, std::array<int64_t, 3> stride,
                           PaddingMode spatial_padding, const nn::LoadOptions& opt);
  int64_t in_channels() const { return weight.size(1); }
  int64_t out_channels() const { return weight.size(0); }
  // Takes x by value and drops it once padded: pass std::move(x) when it is the last use.
  // residual (optional): returns conv(x) + residual (ops::conv3d_replicate_time's residual: the
  // ResNet block's skip added with the bias in one pass on CUDA).
  Tensor operator()(Tensor x, bool causal, const Tensor& residual = {}) const;
  // conv(x) without the bias, for a caller that adds `bias` inside its next op (ResnetBlock3D:
  // conv1's bias inside norm2's PixelNorm + SiLU, ops::rms_norm_dim_silu's bias).
  Tensor unbiased(Tensor x, bool causal) const;
  // Reorders the output channels (weight rows and bias) from c * F + sub to sub * C + c
  // (ops::permute_depth_channels), keeping the weight's memory layout.
  void permute_output_channels(int64_t F);

 private:
  Tensor run(Tensor x, bool causal, const Tensor& b, const Tensor& residual) const;
};

// make_linear_nd(3): a 1x1x1 nn.Conv3d binding `<name>.{weight,bias}`.
struct PointwiseConv3d {
  Tensor weight;  // [out, in, 1, 1, 1]
  Tensor bias;    // [out]
  static PointwiseConv3d load(io::WeightMap& w, const std::string& name, int64_t in_channels,
                              int64_t out_channels, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

}  // namespace ltx::models::video_vae
