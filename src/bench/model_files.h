#pragma once
// A preset's models as files with random values, in the published layouts
// (generate/model_set_writer.h), for timing what reads files: `ltx bench write-models` and
// `ltx bench cold-start`. At ltx23-22b that is the 22B single-file checkpoint (transformer, text
// connectors, video VAE, audio VAE and vocoder; ~46 GB), the Gemma 3 12B single-file text encoder
// (~24 GB) and the x2 spatial upsampler. Values come from bench::RandomWeights on the host (the
// official benchmark's inits: transformer_init for the transformer, connectors and Gemma,
// vae_init for the VAEs, vocoder and upsampler), written one tensor at a time.
//
// Not the published files in two respects: the tokenizer is the demo bundle's (a cut of Gemma 3's
// vocabulary; prompts still pad to the full context), and the Gemma file carries no vision tower.
#include <cstdint>
#include <functional>
#include <string>

namespace ltx::bench {

struct Preset;

struct ModelFileSet {
  std::string checkpoint;         // <dir>/<preset>-checkpoint.safetensors
  std::string text_encoder;       // <dir>/<preset>-gemma.safetensors
  std::string spatial_upsampler;  // <dir>/<preset>-spatial-upscaler-x2.safetensors
};

// The file names of `preset` in `dir` (nothing is written).
ModelFileSet model_files_in(const std::string& dir, const Preset& preset);

// Writes the files of `preset` into `dir` (created if needed) that are not there yet (each file
// is renamed into place when complete, so one that exists is whole); `on_file(path, seconds)`
// is told each file written and how long it took. Throws for a preset without pipeline models.
ModelFileSet write_model_files(const Preset& preset, const std::string& dir, uint64_t seed = 0,
                               const std::function<void(const std::string&, double)>& on_file = {});

}  // namespace ltx::bench
