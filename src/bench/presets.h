#pragma once
// Model presets of `ltx bench`: architecture configs (as checkpoint metadata would hold them) and
// the default shapes to time, so that benchmarks need no files.
//   ltx23-22b  the published LTX-2.3 22B audio-video transformer and its conv video VAE; the
//              issue's shapes: 121 frames at 768x512 and 1536x1024, audio on, 1024 text tokens;
//              VAE decode of 121 frames at 1536x1024 with the pipelines' automatic tiling.
//   ltx25-22b  LTX-2.5 22B: the 2.3 transformer with ff_bias=false and the keyframe position
//              embedding, the same conv VAE, and the diffusion video decoder (config.vae of the 2.5
//              diffusion VAE file); its decode of 121 frames at 1536x1024 with the reference's
//              memory-aware automatic tiling (tools/bench/bench_official_diffdec.py's case).
//   tiny       the same structure at toy widths (2 layers, 2 heads; a diffusion decoder of 16-32
//              channels) and shapes (9 frames at 64x64 and 128x64, 16 text tokens): runs on the CPU
//              in about a second, for smoke tests.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/transformer/config.h"
#include "models/video_vae/model_configurator.h"

namespace ltx::bench {

struct VideoSize {
  int64_t width = 0, height = 0;
  std::string str() const { return std::to_string(width) + "x" + std::to_string(height); }
  bool operator==(const VideoSize&) const = default;
};
// "WxH" (e.g. "768x512"); both multiples of 32 (the VAE's spatial factor) and > 0. `what` names
// the flag in errors.
VideoSize parse_video_size(const std::string& text, const char* what = "--size");

struct Preset {
  std::string name;
  std::string description;
  nlohmann::json transformer;  // metadata config.transformer
  nlohmann::json vae;          // metadata config.vae (the conv video VAE)
  nlohmann::json diffusion_vae;  // config.vae of the diffusion video VAE file; null: none
  // The other models of a whole pipeline (`ltx bench pipeline`): the text encoder's Hugging Face
  // config.json (Gemma 3), the checkpoint's config with its `audio_vae` and `vocoder` sections, the
  // x2 spatial latent upsampler's config. Null in presets that have no pipeline.
  nlohmann::json gemma;
  nlohmann::json audio;
  nlohmann::json upsampler;
  // Default shapes.
  std::vector<VideoSize> transformer_sizes;
  VideoSize vae_size;  // both video decoders
  int64_t frames = 121;
  double fps = 24.0;
  int64_t text_tokens = 1024;
  // The checkpoint's `model_version` metadata: picks the pipeline defaults (the guidance of
  // `--guided`) with the reference's rule, sampling::detect_params.
  std::string model_version;

  models::transformer::LTXModelConfig transformer_config() const;
  bool has_conv_vae() const { return !vae.is_null(); }
  // Throws naming the preset when it has none.
  models::video_vae::DecoderConfig decoder_config() const;
  bool has_diffusion_decoder() const { return !diffusion_vae.is_null(); }
  // Throws naming the preset when it has none.
  models::video_vae::DiffusionDecoderConfig diffusion_decoder_config() const;
};

// "ltx2-19b", "ltx23-22b", "ltx25-22b" or "tiny"; throws listing the names otherwise.
Preset preset(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace ltx::bench
