#pragma once
// The decode stage of every pipeline (the reference's VideoDecoder / AudioDecoder blocks and
// encode_video): final latents -> pixels through the video VAE decoder (the convolutional one or
// LTX-2.5's diffusion decoder, chosen from the file's metadata; tiled with the pipelines'
// automatic layout for that decoder), -> waveform through the audio VAE decoder + vocoder, -> one MP4 (H.264
// yuv420p + AAC at the vocoder's rate). Each decoder is loaded from its file, used and freed (the
// audio ones first, so the video decoder runs alone). Video chunks stream into the encoder as the
// tiled decode yields them. The file appears only when everything succeeded (media::Mp4Writer
// writes a temporary and renames it).
#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "media/video_writer.h"
#include "models/tiling.h"

namespace ltx::generate {

class Progress;

struct DecodeOptions {
  double fps = 24.0;
  // Where the convolutional video decoder runs: the CPU (f32), or a GPU (bf16 weights and
  // activations, as the reference; chunks come back to the host for the encoder). The diffusion
  // decoder and the audio decoder + vocoder run on the CPU.
  Device device = Device::cpu();
  // Decode tiling, checked against the decoder's grid and (diffusion decoder) its overlap floors;
  // nullopt with auto_tiling: the pipelines' automatic layout (reference: tiling_config_for_vae):
  // conv VAE models::tiling::auto_tiling_config, diffusion decoder
  // models::video_vae::recommended_decode_tiling; nullopt without: one tile.
  std::optional<models::tiling::TilingConfig> tiling;
  bool auto_tiling = true;
  // Memory budget (bytes free on the decoding device) of the diffusion decoder's automatic
  // tiling; nullopt: the host's available memory, as the decode runs on the CPU. (The reference
  // passes the CUDA device's free memory, and 0 off CUDA, with which no layout fits.)
  std::optional<int64_t> decode_free_bytes;
  // Seed of the decoder noise of timestep-conditioned video decoders (torch CPU generator; the
  // reference continues the pipeline's generator on its device, which is not reproduced).
  int64_t noise_seed = 0;
  // > 0: cut the waveform to this many seconds (DFR pads its canvas; the reference cuts the audio
  // to the video's length, pipelines::audio_samples_to_keep).
  double audio_max_seconds = 0.0;
  media::Mp4Options mp4;
};

struct DecodeResult {
  int64_t frames = 0, height = 0, width = 0;
  int64_t audio_samples = 0;  // per channel; 0 without audio
  int64_t audio_sample_rate = 0;
};

// video_latent: [1, C, F, H, W] normalised video latent (the pipeline's result); audio_latent:
// [1, z, T, mel] normalised audio latent, or undefined for a silent video. video_vae_path /
// audio_vae_path: files holding the video VAE decoder / the audio VAE decoder + vocoder (a
// single-file checkpoint may be both). `progress` (optional) gets the stages "audio decode" and
// "video decode" (one step per decoded chunk).
DecodeResult decode_to_mp4(const std::string& output_path, const Tensor& video_latent,
                           const Tensor& audio_latent, const std::string& video_vae_path,
                           const std::string& audio_vae_path, const DecodeOptions& options = {},
                           Progress* progress = nullptr);

}  // namespace ltx::generate
