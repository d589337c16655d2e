#pragma once
// The model presets of `ltx pull PRESET`, `ltx generate --model PRESET` and `ltx serve --model
// PRESET`: the exact files of the published Hugging Face repositories (checked against the
// Lightricks/LTX-2 README and MODELS-LTX-2.3.md), the model flag each file fills, the pipeline a
// preset runs by default and those it can run. The table in presets.cpp is the one place these
// names live; docs/MODELS.md describes it.
#include <string>
#include <string_view>
#include <vector>

namespace ltx::hub {

// The model flag a preset file fills.
enum class Role {
  Checkpoint,         // --checkpoint-path: single file (transformer, connectors, VAEs, vocoder)
  Transformer,        // --transformer-path (split layout)
  TextEncoder,        // --text-encoder-path: a single-file text encoder
  GemmaRoot,          // --gemma-root: a whole repository (the Hugging Face Gemma folder)
  VideoVae,           // --video-vae-path
  AudioVae,           // --audio-vae-path
  SpatialUpsampler,   // --spatial-upsampler-path
  TemporalUpsampler,  // --temporal-upsampler-path
  DistilledLora,      // --distilled-lora
};
const char* role_flag(Role role);

struct PresetFile {
  Role role;
  std::string_view repo;
  std::string_view path;  // empty: every file of the repository (GemmaRoot)
};

struct Preset {
  std::string_view name;              // "ltx-2.3-distilled"
  std::string_view model;             // "LTX-2.3 22B, distilled"
  std::string_view default_pipeline;  // --pipeline when none is given
  std::string_view pipelines;         // those the files run, for `ltx models`
  std::string_view quantization;      // --quantization when none is given ("": none)
  std::string_view licence;
  std::vector<PresetFile> files;
};

const std::vector<Preset>& presets();
// nullptr when `name` is no preset.
const Preset* find_preset(std::string_view name);
// The preset, or an ltx::Error naming `flag` and listing the presets.
const Preset& preset(std::string_view name, const std::string& flag);

}  // namespace ltx::hub
