#pragma once
// Video VAE configuration (reference: model/video_vae/model_configurator.py, enums.py) and the
// key filters that select the encoder / decoder tensors of a checkpoint.
//
// The conv VAE ("CausalVideoAutoencoder", LTX-2 / 2.3 / 2.5-conv) keeps its settings flat in the
// file's `config.vae`; the encoder of a CausalDiffusionVAE keeps them under `config.vae.encoder`
// (with `blocks` / `out_channels`). Absent keys take the reference's code defaults, which differ
// between encoder and decoder: the decoder pads spatially with `reflect` and is timestep-conditioned
// unless the config says otherwise.
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/weights.h"
#include "models/tiling.h"
#include "ops/shape.h"

namespace ltx::models::video_vae {

enum class NormLayer { GroupNorm, PixelNorm };
enum class LogVarianceType { PerChannel, Uniform, Constant, None };
// The spatial padding of the VAE's 3-D convolutions (torch padding_mode).
enum class PaddingMode { Zeros, Reflect, Replicate, Circular };

const char* name(NormLayer v);
const char* name(LogVarianceType v);
const char* name(PaddingMode v);
ops::PadMode to_pad_mode(PaddingMode v);  // not for Zeros (which the conv does itself)

// One entry of `encoder_blocks` / `decoder_blocks`: ["name", num_layers] or ["name", {...}].
struct BlockSpec {
  std::string name;
  std::optional<int64_t> num_layers;  // res_x / attn_res_x: required
  std::optional<int64_t> multiplier;  // absent: the block's own default
  bool residual = false;              // decoder compress_all
  bool inject_noise = false;          // decoder res blocks (rejected when true)
  int64_t multiplier_or(int64_t dflt) const { return multiplier.value_or(dflt); }
};

// Time / space scale factors of a block list: each compress_{time,space,all}* block doubles its
// axes, patchify adds patch_size spatially (SpatioTemporalScaleFactors.from_blocks).
tiling::ScaleFactors scale_factors_from_blocks(const std::vector<BlockSpec>& blocks,
                                               int64_t patch_size);

struct EncoderConfig {
  int64_t dims = 3;
  int64_t in_channels = 3;
  int64_t latent_channels = 128;  // encoder `out_channels`
  std::vector<BlockSpec> blocks;
  int64_t patch_size = 4;
  NormLayer norm_layer = NormLayer::PixelNorm;
  LogVarianceType latent_log_var = LogVarianceType::Uniform;
  PaddingMode spatial_padding_mode = PaddingMode::Zeros;
  std::vector<std::string> defaulted;  // config keys that took the code default

  tiling::ScaleFactors scale_factors() const {
    return scale_factors_from_blocks(blocks, patch_size);
  }
};

struct DecoderConfig {
  int64_t dims = 3;
  int64_t latent_channels = 128;  // decoder input channels
  int64_t out_channels = 3;
  std::vector<BlockSpec> blocks;  // in config order (the decoder runs them reversed)
  int64_t patch_size = 4;
  NormLayer norm_layer = NormLayer::PixelNorm;
  bool causal = false;
  bool timestep_conditioning = true;
  PaddingMode spatial_padding_mode = PaddingMode::Reflect;
  int64_t base_channels = 128;
  std::vector<std::string> defaulted;

  tiling::ScaleFactors scale_factors() const {
    return scale_factors_from_blocks(blocks, patch_size);
  }
  // Channels after conv_in: base_channels times the product of the upsampling multipliers.
  int64_t bottleneck_channels() const;
};

// From a file's decoded metadata (SafetensorsFile::metadata_json()); `where` names the file in
// errors. Throws when config.vae is absent or malformed, a block is unknown or a value has the
// wrong type; the decoder also rejects diffusion-decoder configs (not a conv VAE).
EncoderConfig encoder_config_from_metadata(const nlohmann::json& metadata, const std::string& where);
DecoderConfig decoder_config_from_metadata(const nlohmann::json& metadata, const std::string& where);
// The same from the `vae` section itself.
EncoderConfig encoder_config_from_json(const nlohmann::json& vae, const std::string& where);
DecoderConfig decoder_config_from_json(const nlohmann::json& vae, const std::string& where);

// ---- the diffusion decoder (CausalDiffusionVAE / NADiffusionDecoder, LTX-2.5) ----

// Whether a VAE file's metadata describes a diffusion video VAE: config.vae._class_name is
// anything but "CausalVideoAutoencoder" (an absent name reads as the conv VAE), as the reference
// decides.
bool is_diffusion_video_vae(const nlohmann::json& metadata);

using Axis3 = std::array<int64_t, 3>;  // (T, H, W) sizes or (Kt, Kh, Kw) kernels

struct Upsample {
  Axis3 stride{};
  int64_t reduction = 1;
};

enum class ModelOutputType { Velocity, X0 };  // "v" / "x0"

// `config.vae.decoder` (or the flat `config.vae`), with `model_output_type` at the vae level.
// Absent keys take the reference's CODE defaults, which are not the shipped values: the 2.5 file
// says 1 step, x0, scale 1000 and stage-5 kernel (11, 11, 11), and omits t_emb_dim (384).
struct DiffusionDecoderConfig {
  int64_t in_channels = 128;
  int64_t out_channels = 3;
  int64_t patch_size = 4;
  int64_t head_dim = 64;
  std::vector<int64_t> stage_channels{1024, 512, 256, 256, 128};
  std::vector<int64_t> stage_depths{4, 6, 4, 2, 8};
  std::vector<Axis3> stage_kernels{{3, 7, 7}, {3, 7, 7}, {3, 5, 5}, {3, 5, 5}, {3, 3, 3}};
  std::vector<Upsample> upsamples{
      {{1, 2, 2}, 2}, {{2, 1, 1}, 2}, {{2, 2, 2}, 1}, {{2, 2, 2}, 2}};
  Axis3 stage5_kernel{3, 7, 7};
  std::optional<int64_t> stage5_channels;  // absent: stage_channels.back()
  int64_t t_emb_dim = 384;
  int64_t default_num_inference_steps = 2;
  double timestep_scale_multiplier = 1.0;
  ModelOutputType model_output_type = ModelOutputType::Velocity;
  std::vector<std::string> defaulted;  // keys that took the code default

  int64_t context_channels() const { return stage_channels.back(); }
  int64_t diffusion_channels() const { return stage5_channels.value_or(context_channels()); }
};

// From the `vae` section / a file's decoded metadata. Throws naming the key for wrong types,
// inconsistent lists (5 stages, 4 upsamples, widths that the upsamples do not produce) and widths
// that head_dim does not divide.
DiffusionDecoderConfig diffusion_decoder_config_from_json(const nlohmann::json& vae,
                                                          const std::string& where);
DiffusionDecoderConfig diffusion_decoder_config_from_metadata(const nlohmann::json& metadata,
                                                              const std::string& where);

// VAE_ENCODER_COMFY_KEYS_FILTER / VAE_DECODER_COMFY_KEYS_FILTER: monolith `vae.encoder.*` and
// standalone `encoder.*` keys (decoder likewise) lose their prefix, the per-channel statistics
// become `per_channel_statistics.*`.
io::KeyMap encoder_key_map();
io::KeyMap decoder_key_map();
// The diffusion decoder's renaming (video_decoder_sd_ops_for_checkpoint without the load-time
// folds): `vae.decoder.*` / `decoder.*` lose the prefix, `t_embedder.mlp.{0,2}.` become
// `t_embedder.timestep_embedder.linear_{1,2}.`, the statistics become `per_channel_statistics.*`.
// The fused `qkv` stays fused; legacy gates and `coarse_*` are handled by the loader.
io::KeyMap diffusion_decoder_key_map();

}  // namespace ltx::models::video_vae
