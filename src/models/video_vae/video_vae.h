#pragma once
// The video VAE encoder and its tiled encode (reference: model/video_vae/video_vae.py).
//
//   auto enc = VideoEncoder::from_file("ltx-2.3-22b-dev.safetensors");  // or a split vae file
//   Tensor latent = enc(pixels);            // [B, 3, F, H, W] in [-1, 1] -> normalised latent
//   Tensor tiled = enc.tiled_encode(pixels, tiling::TileSizeConfig{...});
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/tiling.h"
#include "models/video_vae/attention.h"
#include "models/video_vae/convolution.h"
#include "models/video_vae/model_configurator.h"
#include "models/video_vae/ops.h"
#include "models/video_vae/resnet.h"
#include "models/video_vae/sampling.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

// Receives intermediate tensors by module name ("down_blocks.3", "conv_out", ...), for parity.
using Probe = std::function<void(const std::string& name, const Tensor& value)>;

class VideoEncoder {
 public:
  using Block = std::variant<UNetMidBlock3D, ResnetBlock3D, CausalConv3d, SpaceToDepthDownsample,
                             AttnBlock3D>;

  // Binds every parameter from `w` (keys as after encoder_key_map()); call w.finish() afterwards.
  static VideoEncoder load(io::WeightMap& w, const EncoderConfig& config,
                           const nn::LoadOptions& opt = {});
  // Opens a video VAE file (single-file checkpoint or split `vae` file): config from its metadata,
  // weights through encoder_key_map(); every tensor under the filter must be used.
  static VideoEncoder from_file(const std::string& path, const nn::LoadOptions& opt = {});

  const EncoderConfig& config() const { return config_; }
  tiling::ScaleFactors video_scale_factors() const { return config_.scale_factors(); }
  int64_t latent_channels() const { return config_.latent_channels; }
  const PerChannelStatistics& per_channel_statistics() const { return stats_; }

  // video [B, in_channels, F, H, W] in [-1, 1] -> normalised latent means in the weights' dtype
  // (the pixels are cast to it, as the reference's encoder built in the pipeline dtype)
  // [B, C, (F-1)/t + 1, H/s, W/s]. Frames beyond the last 1 + t*k are cropped (with a warning).
  Tensor operator()(const Tensor& video, const Probe& probe = {}) const;
  // The same through tiles on the latent grid (causal temporal split, trapezoid masks, weight
  // division when the masks are not complementary). A TileSizeConfig must overlap >= 16 frames /
  // 64 pixels on its tiled axes. No config: one tile.
  Tensor tiled_encode(const Tensor& video, const std::optional<tiling::TilingConfig>& config) const;

 private:
  EncoderConfig config_;
  CausalConv3d conv_in_;
  std::vector<Block> down_blocks_;
  Norm conv_norm_out_;
  CausalConv3d conv_out_;
  PerChannelStatistics stats_;
};

// The tiles of a tiled encode: `in` pixel ranges, `out` latent ranges, masks in latent units
// (reference: prepare_tiles_for_encoding).
std::vector<tiling::Tile> prepare_tiles_for_encoding(
    const Shape& video_shape, int64_t latent_channels,
    const std::optional<tiling::TilingConfig>& config, const tiling::ScaleFactors& scale);

// Frames cropped so that (F - 1) % time == 0.
int64_t valid_frame_count(int64_t frames, int64_t time_factor);

}  // namespace ltx::models::video_vae
