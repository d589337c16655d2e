#pragma once
// ResNet blocks of the video VAE (reference: model/video_vae/resnet.py,
// model/common/normalization.py).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/transformer/timestep_embedding.h"
#include "models/video_vae/convolution.h"
#include "models/video_vae/model_configurator.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

// PixelNorm: x / sqrt(mean_c(x^2) + 1e-8) over channels (no parameters).
inline constexpr double kPixelNormEps = 1e-8;
Tensor pixel_norm(const Tensor& x, double eps = kPixelNormEps);

// The configured norm: PixelNorm, or GroupNorm(groups, eps) with an affine `<name>.{weight,bias}`.
struct Norm {
  NormLayer type = NormLayer::PixelNorm;
  int64_t groups = 32;
  double eps = 1e-6;
  Tensor weight, bias;
  static Norm load(io::WeightMap& w, const std::string& name, NormLayer type, int64_t channels,
                   int64_t groups, double eps, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
  // silu((*this)(x + pre_bias)) (pre_bias optional, per channel: the bias of the conv that made
  // x, rounded in as the conv's bias add would); one pass for PixelNorm (ops::rms_norm_dim_silu,
  // the same bits). x by value: pass std::move(x) so that GroupNorm's input is released before
  // the silu.
  Tensor then_silu(Tensor x, const Tensor& pre_bias = {}) const;
};

// A ResNet block's input, and (when defined) its norm1's activation (norm1.then_silu(x)),
// formed by the block before in the pass that made x (ResnetBlock3D::forward's `next`).
struct ResnetStep {
  Tensor x;
  Tensor h;
};

// norm1 -> [x * (1 + scale1) + shift1] -> SiLU -> conv1 -> norm2 -> [modulate 2] -> SiLU -> conv2,
// plus the input (through GroupNorm(1) + a 1x1x1 conv when the channel count changes). The
// bracketed modulation only with timestep conditioning: `scale_shift_table` [4, in] rows (shift1,
// scale1, shift2, scale2) plus the block's timestep embedding.
struct ResnetBlock3D {
  Norm norm1, norm2;
  CausalConv3d conv1, conv2;
  std::optional<Norm> norm3;                     // GroupNorm(1, in) when in != out
  std::optional<PointwiseConv3d> conv_shortcut;  // when in != out
  Tensor scale_shift_table;                      // [4, in] (timestep conditioning only)
  bool timestep_conditioning = false;

  static ResnetBlock3D load(io::WeightMap& w, int64_t in_channels, int64_t out_channels,
                            NormLayer norm, double eps, int64_t groups, bool timestep_conditioning,
                            PaddingMode padding, const nn::LoadOptions& opt);
  // timestep_embed: [B, 4 * in] (the mid block's embedding) when timestep-conditioned.
  Tensor operator()(Tensor x, bool causal, const Tensor& timestep_embed = Tensor()) const;
  // The same with the activations handed between blocks: in.h (when defined) is taken as
  // norm1.then_silu(in.x); with `next` (the following unmodulated PixelNorm + SiLU: the next
  // block's norm1, or the decoder's conv_norm_out) and an identity skip, the result's h is
  // next->then_silu(result x), formed in the skip's pass (ops::add_then_add_rms_norm_dim_silu_:
  // the same bits, one read of the block's output fewer on CUDA).
  ResnetStep forward(ResnetStep in, bool causal, const Tensor& timestep_embed,
                     const Norm* next) const;
  // Whether forward forms `next`'s activation (identity skip, `next` an unmodulated PixelNorm:
  // `next_modulated` says whether its block modulates it).
  bool hands_on(const Norm* next, bool next_modulated) const;
};

// UNetMidBlock3D: `num_layers` ResnetBlock3D of constant width (`res_blocks.<j>`), with one shared
// `time_embedder` (PixArt, 4 * channels) when timestep-conditioned.
struct UNetMidBlock3D {
  std::vector<ResnetBlock3D> res_blocks;
  std::optional<transformer::PixArtAlphaCombinedTimestepSizeEmbeddings> time_embedder;

  static UNetMidBlock3D load(io::WeightMap& w, int64_t channels, int64_t num_layers,
                             NormLayer norm, bool timestep_conditioning, PaddingMode padding,
                             const nn::LoadOptions& opt);
  // scaled_timestep: [B] (timestep * timestep_scale_multiplier) when timestep-conditioned.
  // x by value: pass std::move(x) so that only one block input is alive at a time.
  Tensor operator()(Tensor x, bool causal, const Tensor& scaled_timestep = Tensor()) const;
  // The same, each block handing the next its norm1 activation where it can (ResnetBlock3D::
  // forward); with `next` (an unmodulated PixelNorm after the last block, e.g. the decoder's
  // conv_norm_out) the result's h, where defined, is next->then_silu(result x).
  ResnetStep forward(Tensor x, bool causal, const Tensor& scaled_timestep, const Norm* next) const;
};

}  // namespace ltx::models::video_vae
