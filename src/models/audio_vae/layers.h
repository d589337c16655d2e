#pragma once
// The torch.nn layers the audio VAE and the vocoder are built from (Conv1d, ConvTranspose1d,
// Conv2d with torch's weight layouts), the reference's normalisation layers
// (model/common/normalization.py: PixelNorm / GroupNorm as build_normalization_layer makes them)
// and its CausalConv2d (model/audio_vae/causal_conv_2d.py).
#include <array>
#include <string>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/audio_vae/config.h"
#include "models/audio_vae/probe.h"
#include "nn/module.h"

namespace ltx::models::audio_vae {

// torch.nn.Conv1d: weight [out, in / groups, k], bias [out] or none; symmetric zero padding.
struct Conv1d {
  Tensor weight, bias;
  int64_t stride = 1, padding = 0, dilation = 1;

  static Conv1d load(io::WeightMap& w, const std::string& name, int64_t in, int64_t out,
                     int64_t kernel, bool has_bias, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// torch.nn.ConvTranspose1d: weight [in, out, k], bias [out] or none.
struct ConvTranspose1d {
  Tensor weight, bias;
  int64_t stride = 1, padding = 0;

  static ConvTranspose1d load(io::WeightMap& w, const std::string& name, int64_t in, int64_t out,
                              int64_t kernel, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// torch.nn.Conv2d with symmetric zero padding: weight [out, in, kh, kw], bias [out].
struct Conv2d {
  Tensor weight, bias;
  std::array<int64_t, 2> stride = {1, 1}, padding = {0, 0};

  static Conv2d load(io::WeightMap& w, const std::string& name, int64_t in, int64_t out,
                     int64_t kernel, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// CausalConv2d (always built through make_conv2d with a causality axis here): zero-pads
// (left, right, top, bottom) by the axis' rule, then an unpadded Conv2d stored under `.conv`.
//   none: symmetric; width / width-compatibility: all of the W padding on the left;
//   height: all of the H padding on top (the time axis of the audio VAE).
struct CausalConv2d {
  Conv2d conv;
  std::array<int64_t, 4> pad = {0, 0, 0, 0};  // F.pad order: W left, W right, H top, H bottom

  static CausalConv2d load(io::WeightMap& w, const std::string& name, int64_t in, int64_t out,
                           int64_t kernel, CausalityAxis axis, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// build_normalization_layer(channels, normtype): PixelNorm over channels with eps 1e-6
// (no weights) or GroupNorm(32 groups, eps 1e-6, affine: `.weight`, `.bias`).
struct Norm {
  NormType type = NormType::Pixel;
  Tensor weight, bias;  // GroupNorm only

  static constexpr int64_t kGroups = 32;
  static constexpr double kEps = 1e-6;
  static Norm load(io::WeightMap& w, const std::string& name, int64_t channels, NormType type,
                   const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

}  // namespace ltx::models::audio_vae
