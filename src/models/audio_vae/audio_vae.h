#pragma once
// The audio VAE (reference: model/audio_vae/audio_vae.py) and the pipeline-level audio helpers:
//   AudioEncoder: stereo log-mel [B, 2, T, 64] -> normalised latent [B, z, T', 16]
//   AudioDecoder: normalised latent [B, z, T, 16] -> log-mel [B, 2, max(4T - 3, 1), 64]
//   encode_audio: waveform (any rate) -> latent;  decode_audio: latent -> waveform (+ rate)
// Layout: H = time (the causal axis in the released files), W = mel bins. Latents are normalised
// with per-channel statistics in the patchified token space (b c t f -> b t (c f)).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/audio_vae/attention.h"
#include "models/audio_vae/downsample.h"
#include "models/audio_vae/mel.h"
#include "models/audio_vae/resnet.h"
#include "models/audio_vae/upsample.h"
#include "models/audio_vae/vocoder.h"

namespace ltx::models::audio_vae {

// The latent downsampling factor in time and frequency (LATENT_DOWNSAMPLE_FACTOR).
inline constexpr int64_t kLatentDownsampleFactor = 4;

// AUDIO_VAE_{ENCODER,DECODER}_COMFY_KEYS_FILTER: keys under "audio_vae.encoder." (or
// ".decoder.") lose that prefix, "audio_vae.per_channel_statistics." becomes
// "per_channel_statistics.".
io::KeyMap encoder_key_map();
io::KeyMap decoder_key_map();

// AudioPatchifier(patch_size 1): [B, C, T, F] <-> tokens [B, T, C * F] (index c * F + f).
Tensor patchify_audio(const Tensor& latent);
Tensor unpatchify_audio(const Tensor& tokens, int64_t channels, int64_t mel_bins);

// `per_channel_statistics.{mean-of-means, std-of-means}` [ch], applied to patchified tokens.
struct PerChannelStatistics {
  Tensor mean, std;

  static PerChannelStatistics load(io::WeightMap& w, int64_t channels, const nn::LoadOptions& opt);
  Tensor normalize(const Tensor& tokens) const;     // (x - mean) / std
  Tensor un_normalize(const Tensor& tokens) const;  // x * std + mean
};

// The mid block: block_1 -> attn_1 (when mid_block_add_attention) -> block_2.
struct MidBlock {
  ResnetBlock block_1, block_2;
  std::optional<AttnBlock> attn_1;

  static MidBlock load(io::WeightMap& w, int64_t channels, const AudioVaeConfig& cfg,
                       AttentionType attn_type, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

class AudioEncoder {
 public:
  static AudioEncoder load(io::WeightMap& w, const AudioVaeConfig& cfg, const nn::LoadOptions& opt);
  // Reads config.audio_vae, binds with encoder_key_map() and reports every missing, misshaped or
  // unused tensor in one error. f32 weights on the CPU or CUDA, bf16 on CUDA (the activations
  // follow the weights' dtype).
  static AudioEncoder from_file(const std::shared_ptr<const io::SafetensorsFile>& file,
                                const nn::LoadOptions& opt = {});

  // log-mel [B, in_channels, T, mel_bins] -> normalised latent [B, z, T', mel_bins'] (the first
  // half of conv_out's channels, i.e. the means). Probes: conv_in, down{l}, mid, conv_out,
  // latent_tokens_raw (patchified means before normalisation).
  Tensor forward(const Tensor& mel, const Probe& probe = {}) const;
  // The AudioProcessor encode_audio builds from this encoder.
  AudioProcessor processor() const;
  const AudioVaeConfig& config() const { return cfg_; }

 private:
  AudioVaeConfig cfg_;
  PerChannelStatistics stats_;
  CausalConv2d conv_in_, conv_out_;
  std::vector<DownLevel> down_;
  MidBlock mid_;
  Norm norm_out_;
};

class AudioDecoder {
 public:
  static AudioDecoder load(io::WeightMap& w, const AudioVaeConfig& cfg, const nn::LoadOptions& opt);
  static AudioDecoder from_file(const std::shared_ptr<const io::SafetensorsFile>& file,
                                const nn::LoadOptions& opt = {});

  // f32 weights, or bf16 on CUDA; the activations run in the weights' dtype (the reference's
  // AudioDecoder block builds it in the pipeline dtype, bf16 on a GPU), so the mel comes out in
  // that dtype.
  // Normalised latent [B, z, T, F] -> log-mel [B, out_ch, T_mel, mel_bins] with
  // T_mel = max(4T - 3, 1) (causal) or 4T, mel_bins from the config (else F), cropped / zero-padded
  // to that shape. Probes: latent_tokens, latent_tokens_denorm, latent_denorm, conv_in, mid,
  // up{l} (after level l, levels run n-1 .. 0), conv_out (before the crop / pad).
  Tensor forward(const Tensor& latent, const Probe& probe = {}) const;
  const AudioVaeConfig& config() const { return cfg_; }

 private:
  AudioVaeConfig cfg_;
  PerChannelStatistics stats_;
  CausalConv2d conv_in_, conv_out_;
  MidBlock mid_;
  std::vector<UpLevel> up_;
  Norm norm_out_;
};

// ltx_core encode_audio: waveform [B, C, N] at any rate -> normalised latent, through
// `processor` (or the encoder's own AudioProcessor when null).
Tensor encode_audio(const Audio& audio, const AudioEncoder& encoder,
                    const AudioProcessor* processor = nullptr, const Probe& probe = {});
// ltx_core decode_audio: Audio(vocoder(decoder(latent)).squeeze(0), vocoder rate); the batch dim
// is dropped only when it is 1 ([2, N] for one latent, [B, 2, N] otherwise). Probe: "mel".
Audio decode_audio(const Tensor& latent, const AudioDecoder& decoder, const VocoderModel& vocoder,
                   const Probe& probe = {});

// AudioLatentShape.from_duration(...).frames: round(seconds * rate / hop / 4) with Python's
// half-to-even round (defaults: 16 kHz, hop 160 -> 25 latents per second).
int64_t audio_latent_frames(double seconds, int64_t sample_rate = 16000, int64_t hop_length = 160,
                            int64_t downsample_factor = kLatentDownsampleFactor);
// AudioLatentShape.from_video_pixel_shape(...).frames: the duration is frames / fps.
int64_t audio_latent_frames_for_video(int64_t num_frames, double fps);
// ltx_pipelines helpers._conform_latent_length: trim dim 2 to `frames` or zero-pad it at the end.
Tensor conform_latent_length(const Tensor& latent, int64_t frames);

}  // namespace ltx::models::audio_vae
