#pragma once
// The convolutional video VAE decoder and its tiled decode (reference:
// model/video_vae/conv_video_decoder.py).
//
//   auto dec = ConvVideoDecoder::from_file("ltx-2.3-22b-dev.safetensors");
//   Tensor pixels = dec(latent);                                    // [B, 3, F, H, W], un-clamped
//   dec.tiled_decode(latent, tiling::auto_tiling_config(H, W), {}, {},
//                    [](const Tensor& chunk) { /* [B, 3, f, H, W], write it out */ });
//
// Tiled decode yields the video in temporal chunks and holds at most two chunk buffers of the
// full frame size plus one tile's activations, so its peak memory grows with the tile size (and
// the frame area), not with the number of frames. docs/VIDEO_VAE.md has the estimate.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/tiling.h"
#include "models/transformer/timestep_embedding.h"
#include "models/video_vae/attention.h"
#include "models/video_vae/convolution.h"
#include "models/video_vae/model_configurator.h"
#include "models/video_vae/ops.h"
#include "models/video_vae/resnet.h"
#include "models/video_vae/sampling.h"
#include "models/video_vae/video_vae.h"
#include "nn/module.h"

namespace ltx::models::video_vae {

// Standard-normal noise of the given shape (the pipeline's generator). A timestep-conditioned
// decoder draws once per forward, i.e. once per tile in tiled decode, in tile order.
using NoiseFn = std::function<Tensor(const Shape& shape)>;
// Receives the decoded chunks in temporal order.
using ChunkFn = std::function<void(const Tensor& chunk)>;

class ConvVideoDecoder {
 public:
  using Block = std::variant<UNetMidBlock3D, ResnetBlock3D, DepthToSpaceUpsample, AttnBlock3D>;

  static constexpr double kDecodeNoiseScale = 0.025;
  static constexpr double kDecodeTimestep = 0.05;

  // Binds every parameter from `w` (keys as after decoder_key_map()); call w.finish() afterwards.
  static ConvVideoDecoder load(io::WeightMap& w, const DecoderConfig& config,
                               const nn::LoadOptions& opt = {});
  // Opens a video VAE file: config from its metadata, weights through decoder_key_map(); every
  // tensor under the filter must be used.
  static ConvVideoDecoder from_file(const std::string& path, const nn::LoadOptions& opt = {});

  const DecoderConfig& config() const { return config_; }
  tiling::ScaleFactors video_downscale_factors() const { return config_.scale_factors(); }
  const PerChannelStatistics& per_channel_statistics() const { return stats_; }
  // Output [B, out_channels, (F-1)*t + 1, H*s, W*s] for a latent [B, C, F, H, W].
  Shape output_shape(const Shape& latent) const;

  // latent [B, C, F, H, W] (normalised) -> pixels [B, out_channels, (F-1)t+1, H s, W s], not
  // clamped. With timestep conditioning: x = 0.025 * noise(shape) + 0.975 * latent first, and
  // `timestep` [B] (default 0.05 for every sample) conditions the res blocks; `noise` is then
  // required. The temporal padding follows the config's causal_decoder.
  Tensor operator()(const Tensor& latent, const std::optional<Tensor>& timestep = std::nullopt,
                    const NoiseFn& noise = {}, const Probe& probe = {}) const;

  // Decodes tile by tile and calls on_chunk with each temporal chunk [B, out, f, H, W] as soon as
  // the following temporal tiles no longer touch it (a chunk may have 0 frames, as in the
  // reference). No config: one tile. Returns nothing; the chunks concatenated along frames are the
  // decoded video.
  void tiled_decode(const Tensor& latent, const std::optional<tiling::TilingConfig>& config,
                    const std::optional<Tensor>& timestep, const NoiseFn& noise,
                    const ChunkFn& on_chunk) const;
  // The chunks of tiled_decode, concatenated (convenience for small videos and tests); their
  // frame counts go to chunk_frames when given.
  Tensor tiled_decode_all(const Tensor& latent, const std::optional<tiling::TilingConfig>& config,
                          const std::optional<Tensor>& timestep = std::nullopt,
                          const NoiseFn& noise = {},
                          std::vector<int64_t>* chunk_frames = nullptr) const;

  // The pipelines' decode_video: sample 0 as [f, H, W, C] chunks in [0, 1] ((x + 1) / 2,
  // clamped), tiled when a config is given.
  void decode_video(const Tensor& latent, const std::optional<tiling::TilingConfig>& config,
                    const NoiseFn& noise, const ChunkFn& on_chunk) const;

  // On CUDA (bf16) the activations run channels-last (the default; see operator()); off keeps them
  // contiguous NCDHW (the layout before, for tests and comparisons). No effect on the CPU.
  void set_cuda_channels_last(bool on) { cuda_channels_last_ = on; }

 private:
  bool cuda_channels_last_ = true;
  DecoderConfig config_;
  PerChannelStatistics stats_;
  CausalConv3d conv_in_;
  std::vector<Block> up_blocks_;
  Norm conv_norm_out_;
  CausalConv3d conv_out_;
  // Timestep conditioning only.
  Tensor timestep_scale_multiplier_;  // 0-d
  std::optional<transformer::PixArtAlphaCombinedTimestepSizeEmbeddings> last_time_embedder_;
  Tensor last_scale_shift_table_;  // [2, C]

};

// The tiles of a tiled decode of `latent` (reference: ConvVideoDecoder._prepare_tiles): `in`
// latent ranges, `out` pixel ranges of the decoded video `output_shape`, masks in pixel units.
std::vector<tiling::Tile> prepare_tiles_for_decoding(
    const Shape& latent, const Shape& output_shape, const tiling::ScaleFactors& scale,
    const std::optional<tiling::TilingConfig>& config);

}  // namespace ltx::models::video_vae
