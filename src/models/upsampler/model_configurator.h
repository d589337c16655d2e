#pragma once
// Latent upsampler configuration (reference: model/upsampler/model_configurator.py): the flat
// top-level `config` metadata of an upsampler file, with the reference's defaults.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ltx::models::upsampler {

struct LatentUpsamplerConfig {
  int64_t in_channels = 128;
  int64_t mid_channels = 512;
  int64_t num_blocks_per_stage = 4;
  int64_t dims = 3;
  bool spatial_upsample = true;
  bool temporal_upsample = false;
  double spatial_scale = 2.0;
  bool rational_resampler = false;
  std::vector<std::string> defaulted;  // keys that took the code default
};

// From a file's decoded metadata (SafetensorsFile::metadata_json()); `where` names the file.
// Throws for a missing `config`, wrong value types, neither spatial nor temporal upsampling, a
// rational scale other than 0.75 / 1.5 / 2 / 4, dims other than 2 / 3, and combinations the
// reference cannot run (temporal upsampling with dims 2).
LatentUpsamplerConfig upsampler_config_from_metadata(const nlohmann::json& metadata,
                                                    const std::string& where);
LatentUpsamplerConfig upsampler_config_from_json(const nlohmann::json& config,
                                                const std::string& where);

// num / den of a rational spatial scale: 0.75 -> 3/4, 1.5 -> 3/2, 2 -> 2/1, 4 -> 4/1.
std::pair<int64_t, int64_t> rational_for_scale(double scale);

}  // namespace ltx::models::upsampler
