#pragma once
// Residual blocks (reference: model/audio_vae/resnet.py): the audio VAE's ResnetBlock and the
// HiFi-GAN vocoder's ResBlock1.
#include <array>
#include <optional>
#include <string>

#include "models/audio_vae/layers.h"

namespace ltx::models::audio_vae {

// norm1 -> SiLU -> conv1 -> norm2 -> SiLU -> conv2, plus x (through a 1x1 `nin_shortcut` when
// the channel count changes). No timestep embedding (temb_channels is 0 in the audio VAE).
struct ResnetBlock {
  int64_t in_channels = 0, out_channels = 0;
  Norm norm1, norm2;
  CausalConv2d conv1, conv2;
  std::optional<CausalConv2d> nin_shortcut;

  static ResnetBlock load(io::WeightMap& w, const std::string& name, int64_t in, int64_t out,
                          NormType norm, CausalityAxis axis, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// torch.nn.functional.leaky_relu(x, slope) for 0 < slope < 1: max(x, slope * x).
Tensor leaky_relu(const Tensor& x, double slope);

// HiFi-GAN ResBlock1: three times x = x + conv2(lrelu(conv1(lrelu(x)))) with leaky slope 0.1,
// conv1 dilated by dilation[i], conv2 undilated, both "same"-padded, kernel `kernel`.
struct ResBlock1 {
  static constexpr double kSlope = 0.1;  // LRELU_SLOPE
  std::array<Conv1d, 3> convs1, convs2;

  static ResBlock1 load(io::WeightMap& w, const std::string& name, int64_t channels,
                        int64_t kernel, const std::vector<int64_t>& dilation,
                        const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// Conv1d with padding="same" (stride 1): d * (k - 1) zeros split as left = total / 2, right =
// the rest.
Tensor conv1d_same(const Conv1d& conv, const Tensor& x);

}  // namespace ltx::models::audio_vae
