#include "generate/model_presets.h"

#include "core/error.h"

namespace ltx::generate {

using hub::Role;

std::vector<hub::PresetFile> preset_files_needed(const hub::Preset& preset, const ModelFlags& f,
                                                 const ComponentNeeds* needs) {
  const bool checkpoint_given = !f.checkpoint_path.empty() || !f.distilled_checkpoint_path.empty();
  std::vector<hub::PresetFile> out;
  for (const hub::PresetFile& file : preset.files) {
    bool use = true;
    switch (file.role) {
      case Role::Checkpoint:
      case Role::Transformer:
        use = !checkpoint_given && f.transformer_path.empty();
        break;
      case Role::VideoVae: use = !checkpoint_given && f.video_vae_path.empty(); break;
      case Role::AudioVae: use = !checkpoint_given && f.audio_vae_path.empty(); break;
      case Role::TextEncoder:
      case Role::GemmaRoot:
        use = f.text_encoder_path.empty() && f.gemma_root.empty() &&
              (needs == nullptr || needs->text_encoder);
        break;
      case Role::SpatialUpsampler:
        use = f.spatial_upsampler_path.empty() && (needs == nullptr || needs->spatial_upsampler);
        break;
      case Role::TemporalUpsampler:
        use = f.temporal_upsampler_path.empty() && (needs == nullptr || needs->temporal_upsampler);
        break;
      case Role::DistilledLora:
        use = !f.distilled_lora && (needs == nullptr || needs->distilled_lora);
        break;
    }
    if (use) out.push_back(file);
  }
  return out;
}

void apply_preset_files(ModelFlags& flags, const std::vector<hub::PresetFile>& files,
                        const std::vector<std::string>& paths) {
  LTX_CHECK(files.size() == paths.size(), "apply_preset_files: ", files.size(), " files but ",
            paths.size(), " paths");
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& p = paths[i];
    switch (files[i].role) {
      case Role::Checkpoint: flags.checkpoint_path = p; break;
      case Role::Transformer: flags.transformer_path = p; break;
      case Role::TextEncoder: flags.text_encoder_path = p; break;
      case Role::GemmaRoot: flags.gemma_root = p; break;
      case Role::VideoVae: flags.video_vae_path = p; break;
      case Role::AudioVae: flags.audio_vae_path = p; break;
      case Role::SpatialUpsampler: flags.spatial_upsampler_path = p; break;
      case Role::TemporalUpsampler: flags.temporal_upsampler_path = p; break;
      case Role::DistilledLora: flags.distilled_lora = LoraSpec{p, 1.0}; break;
    }
  }
}

}  // namespace ltx::generate
