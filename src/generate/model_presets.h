#pragma once
// The model flags a preset (hub/presets.h) fills for one run: the files its pipeline uses, as the
// built-in demo bundle's flags are chosen (demo_model_flags), minus every part an explicit model
// flag already names (an explicit flag always wins).
#include <string>
#include <vector>

#include "generate/components.h"
#include "generate/model_paths.h"
#include "hub/presets.h"

namespace ltx::generate {

// The preset's files the run needs. `needs` null: every file (`ltx serve`, which runs any
// pipeline). A checkpoint flag (--checkpoint-path, --distilled-checkpoint-path) replaces the
// preset's checkpoint or split transformer and VAEs; --transformer-path its checkpoint or
// transformer; --text-encoder-path / --gemma-root its text encoder; each other flag its own part.
std::vector<hub::PresetFile> preset_files_needed(const hub::Preset& preset, const ModelFlags& given,
                                                 const ComponentNeeds* needs);

// Sets the flag of each file to its local path (files[i] -> paths[i]); the distilled LoRA at
// strength 1.
void apply_preset_files(ModelFlags& flags, const std::vector<hub::PresetFile>& files,
                        const std::vector<std::string>& paths);

}  // namespace ltx::generate
