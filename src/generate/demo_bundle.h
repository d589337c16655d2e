#pragma once
// The built-in demo bundle: a tiny LTX-2.3-shaped model set with random weights, so that
// `ltx generate --prompt "..."` runs the real code path (loaders, text encoder, pipelines, VAE
// decoders, MP4 writer) without any download. Its output is noise-like video and audio, not a
// real generation.
//
// The files are made deterministically (fixed configs; every tensor's values come from a hash of
// its name) and written once into a cache folder; later runs reuse them. The model files are
// written by generate/model_set_writer.h (each component's own loader lists its tensors); the
// folder is built under a temporary name and renamed, so a partial bundle is never used.
//
//   ltx-2.3-demo.safetensors          single-file checkpoint: transformer (2 blocks, width 32 /
//                                     audio 16), text connectors + projection (V2), video VAE
//                                     (encoder + decoder, 16 latent channels), audio VAE encoder +
//                                     decoder (2 x 16 latent) and BigVGAN vocoder with bandwidth
//                                     extension
//   gemma-3-demo.safetensors          single-file Gemma 3 text encoder (6 layers, width 24) with a
//                                     1088-token tokenizer.json compiled into the binary
//   spatial-upscaler-x2-demo.safetensors   x2 spatial latent upsampler
//   temporal-upscaler-x2-demo.safetensors  x2 temporal latent upsampler (dfr's temporal rounds)
//   distilled-lora-demo.safetensors   rank-2 LoRA on the self-attention projections
//   ic-lora-demo.safetensors          rank-2 IC-LoRA (metadata reference_downscale_factor "1"),
//                                     what --pipeline ic-lora fuses into its first stage
//   hdr-ic-lora-demo.safetensors      rank-2 HDR IC-LoRA (metadata hdr_transform "logc3",
//                                     reference_downscale_factor "1"), what --pipeline
//                                     hdr-ic-lora fuses into both stages
//   gemma3_t2v_system_prompt.txt      the system prompt --enhance-prompt finds next to the text
//                                     encoder
#include <cstdint>
#include <string>

namespace ltx::generate {

struct DemoBundle {
  std::string dir;
  std::string checkpoint;
  std::string text_encoder;
  std::string spatial_upsampler;
  std::string temporal_upsampler;
  std::string distilled_lora;
  std::string system_prompt;  // for --enhance-prompt (a short one of our own)
  std::string ic_lora;        // for --pipeline ic-lora
  std::string hdr_lora;       // for --pipeline hdr-ic-lora
};

// Bump when the bundle's content changes, so stale caches are not reused.
inline constexpr const char* kDemoBundleVersion = "demo-v3";

// Demo defaults (small enough for seconds on a laptop CPU; multiples of 64 so that every
// pipeline accepts them): 192x320, 25 frames (about one second at 24 fps).
inline constexpr int64_t kDemoHeight = 192;
inline constexpr int64_t kDemoWidth = 320;
inline constexpr int64_t kDemoNumFrames = 25;

// $XDG_CACHE_HOME/ltx/<version>, else $HOME/.cache/ltx/<version>; throws when neither is set.
std::string default_demo_dir();

// The bundle in `dir`, written first when the folder does not exist yet.
DemoBundle ensure_demo_bundle(const std::string& dir);

// Writes the bundle's files into `dir` (which must exist). Deterministic: the same bytes every
// time.
void write_demo_bundle_files(const std::string& dir);

}  // namespace ltx::generate
