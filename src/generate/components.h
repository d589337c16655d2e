#pragma once
// Checks, before anything heavy is loaded, that the files a pipeline needs are given, hold the
// right components, and agree with each other (from their headers and config metadata only):
//
//   * presence: the transformer, text connectors + projection, Gemma, video VAE decoder (and its
//     encoder when images condition the video or a latent upsampler runs), audio VAE decoder +
//     vocoder, the latent upsampler and the distilled LoRA when the pipeline uses them;
//   * agreement: the transformer's video / audio latent widths against the VAEs', the upsampler's
//     channels against the VAE's, the upsampler being a spatial x2 one, the Gemma version against
//     the LTX checkpoint (the reference's rule), the video VAE's 8x32x32 compression. The video
//     decoder is the convolutional one or LTX-2.5's diffusion decoder, as the VAE file's metadata
//     says (config.vae._class_name, like the reference); the file must hold that decoder.
//
// Errors name the flag to pass or the file at fault.
#include <cstdint>
#include <string>
#include <vector>

#include "generate/model_paths.h"

namespace ltx::generate {

struct ComponentNeeds {
  std::string pipeline;             // for messages ("two-stage", ...)
  bool video_encoder = false;       // image conditioning or latent upsampling
  bool spatial_upsampler = false;   // distilled, two-stage, two-stage-hq
  bool distilled_lora = false;      // two-stage, two-stage-hq, dfr
  bool temporal_upsampler = false;  // dfr with temporal rounds
  // false: the text contexts come precomputed (hdr-ic-lora --text-embeddings), so neither the
  // Gemma text encoder nor the text connectors are needed.
  bool text_encoder = true;
};

// What the checks found (for the log and the pipelines' defaults).
struct ComponentReport {
  std::string model_version;  // the transformer file's `model_version` ("" for LTX-2 19B)
  std::string version_name;   // "LTX-2.3 (22B)", ...
  int64_t video_latent_channels = 0;
  int64_t audio_latent_channels = 0;  // z_channels
  int64_t audio_mel_bins = 0;         // latent mel bins (mel_bins / 4)
  int64_t audio_sample_rate = 0;      // the vocoder's output rate
  std::vector<std::string> warnings;
};

ComponentReport check_components(const ModelPaths& paths, const ComponentNeeds& needs);

}  // namespace ltx::generate
