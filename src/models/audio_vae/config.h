#pragma once
// Configuration of the audio VAE and the vocoder, parsed from a checkpoint's `config` metadata
// (sections `audio_vae` and `vocoder`) the way the reference's configurators read them
// (model/audio_vae/model_configurator.py): same keys, same code defaults when a key is absent,
// same hard checks. Values of the wrong JSON type, unknown enum strings and contradictory sizes
// are errors naming the key.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ltx::models::audio_vae {

// Axis along which the 2-D convolutions are causal (H = time, W = mel bins in this model).
enum class CausalityAxis { None, Width, Height, WidthCompatibility };
enum class NormType { Group, Pixel };
enum class AttentionType { Vanilla, Linear, None };

const char* causality_axis_name(CausalityAxis a);
const char* norm_type_name(NormType n);

// config.audio_vae: model.params.ddconfig + model.params.sampling_rate + preprocessing.*.
// The encoder reads every field; the decoder ignores double_z, resamp_with_conv, in_channels,
// attn_type and n_fft (as in the reference).
struct AudioVaeConfig {
  int64_t ch = 128;
  int64_t out_ch = 2;
  std::vector<int64_t> ch_mult = {1, 2, 4};
  int64_t num_res_blocks = 2;
  std::set<int64_t> attn_resolutions = {8, 16, 32};  // code default; the files say []
  int64_t resolution = 256;
  int64_t z_channels = 8;
  bool double_z = true;
  bool resamp_with_conv = true;
  int64_t in_channels = 2;
  AttentionType attn_type = AttentionType::Vanilla;
  bool mid_block_add_attention = true;  // code default; the files say false
  NormType norm_type = NormType::Pixel;
  CausalityAxis causality_axis = CausalityAxis::Height;
  // model.params.sampling_rate, preprocessing.stft.{hop_length, filter_length, causal}
  int64_t sample_rate = 16000;
  int64_t mel_hop_length = 160;
  int64_t n_fft = 1024;
  bool is_causal = true;
  // ddconfig.mel_bins, else preprocessing.mel.n_mel_channels, else variables.mel_bins (Python `or`:
  // a 0 or null falls through); absent everywhere = unknown.
  std::optional<int64_t> mel_bins = std::nullopt;

  // `config` is the decoded `config` metadata object (the whole one, holding `audio_vae`); a
  // missing `audio_vae` section gives the code defaults, as in the reference. `where` names the
  // file in errors.
  static AudioVaeConfig from_config(const nlohmann::json& config, const std::string& where);
};

// One generator (the reference's Vocoder): HiFi-GAN ("1") or BigVGAN-v2 ("AMP1").
struct GeneratorConfig {
  std::vector<int64_t> resblock_kernel_sizes = {3, 7, 11};
  std::vector<int64_t> upsample_rates = {6, 5, 2, 2, 2};
  std::vector<int64_t> upsample_kernel_sizes = {16, 15, 8, 4, 4};
  std::vector<std::vector<int64_t>> resblock_dilation_sizes = {{1, 3, 5}, {1, 3, 5}, {1, 3, 5}};
  int64_t upsample_initial_channel = 1024;
  std::string resblock = "1";
  int64_t output_sampling_rate = 24000;
  std::string activation = "snake";  // AMP blocks: "snakebeta" -> SnakeBeta, anything else Snake
  bool use_tanh_at_final = true;
  bool apply_final_activation = true;
  bool use_bias_at_final = true;

  bool is_amp() const { return resblock == "AMP1"; }
  int64_t upsample_factor() const;  // product of upsample_rates (samples per mel frame)
  int64_t final_channels() const;   // upsample_initial_channel / 2^len(upsample_rates)
};

// The bandwidth-extension part of config.vocoder.bwe (2.3 / 2.5).
struct BweConfig {
  int64_t input_sampling_rate = 0;
  int64_t output_sampling_rate = 0;
  int64_t hop_length = 0;
  int64_t n_fft = 0;  // also the STFT window length (the reference does not read win_size)
  int64_t num_mels = 0;
};

// config.vocoder: flat (LTX-2 19B, a plain HiFi-GAN Vocoder) or {"vocoder": ..., "bwe": ...}
// (2.3 / 2.5: BigVGAN at 16 kHz + bandwidth extension). The version switch is the presence of
// "bwe", as in the reference.
struct VocoderConfig {
  GeneratorConfig vocoder;
  bool has_bwe = false;
  GeneratorConfig bwe_generator;  // valid when has_bwe
  BweConfig bwe;                  // valid when has_bwe

  // Rate of the waveform the whole vocoder returns (24000 for 19B, 48000 for 2.3 / 2.5).
  int64_t output_sampling_rate() const {
    return has_bwe ? bwe.output_sampling_rate : vocoder.output_sampling_rate;
  }
  static VocoderConfig from_config(const nlohmann::json& config, const std::string& where);
};

}  // namespace ltx::models::audio_vae
