#pragma once
// The latent upsampler (reference: model/upsampler/model.py): spatial x2, rational spatial
// (x0.75 / x1.5 / x2 / x4), temporal x2 (F -> 2F - 1) or spatial + temporal x2 in one.
//
//   auto up = LatentUpsampler::from_file("ltx-2.3-spatial-upscaler-x2-1.1.safetensors");
//   auto stats = load_video_latent_statistics("ltx-2.3-22b-dev.safetensors");
//   Tensor hi = upsample_video(latent, stats, up);
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/upsampler/model_configurator.h"
#include "models/upsampler/res_block.h"
#include "models/upsampler/spatial_rational_resampler.h"
#include "models/video_vae/ops.h"
#include "nn/module.h"

namespace ltx::models::upsampler {

// Receives intermediate tensors by name ("after_initial", "after_res_blocks", "after_upsampler"
// (temporal: before its first frame is dropped), "after_post_res_blocks").
using Probe = std::function<void(const std::string& name, const Tensor& value)>;

class LatentUpsampler {
 public:
  // Binds the bare keys of an upsampler file; call w.finish() afterwards.
  static LatentUpsampler load(io::WeightMap& w, const LatentUpsamplerConfig& config,
                              const nn::LoadOptions& opt = {});
  // Opens an upsampler file (flat `config` metadata, bare keys; every tensor must be used).
  static LatentUpsampler from_file(const std::string& path, const nn::LoadOptions& opt = {});

  const LatentUpsamplerConfig& config() const { return config_; }
  // Output shape for an input latent [B, C, F, H, W].
  Shape output_shape(const Shape& latent) const;
  // latent [B, in, F, H, W] (un-normalised) -> upsampled latent (un-normalised).
  Tensor operator()(const Tensor& latent, const Probe& probe = {}) const;

 private:
  enum class Kind { Spatial2x, Rational, Temporal, SpatioTemporal };
  LatentUpsamplerConfig config_;
  Kind kind_ = Kind::Spatial2x;
  Conv initial_conv_;
  Tensor initial_norm_weight_, initial_norm_bias_;
  std::vector<ResBlock> res_blocks_;
  Conv upsampler_conv_;                        // upsampler.0 (non-rational kinds)
  std::optional<SpatialRationalResampler> rational_;  // upsampler.* (rational)
  std::vector<ResBlock> post_upsample_res_blocks_;
  Conv final_conv_;
};

// The video VAE's per-channel statistics alone, read from a video VAE file through the encoder's
// key filter (the pipelines build the encoder from the VAE file for exactly these).
video_vae::PerChannelStatistics load_video_latent_statistics(const std::string& vae_path,
                                                             const nn::LoadOptions& opt = {});

// normalize(upsampler(un_normalize(latent))) with the video encoder's statistics.
Tensor upsample_video(const Tensor& latent, const video_vae::PerChannelStatistics& stats,
                      const LatentUpsampler& upsampler, const Probe& probe = {});

}  // namespace ltx::models::upsampler
