// diffusers_config: the config.json files of a Diffusers pipeline's components translated into the
// official `config` metadata (io::diffusers_metadata, io/layouts.h), then read by the official
// configurators as the models read it (transformer, video VAE encoder / decoder, audio VAE,
// vocoder).
//
// Input: the transformer's, connectors', vae's, audio_vae's, vocoder's and (LTX-2.5)
// diffusion_decoder's config.json, separated by NUL. A part that is not JSON leaves that component
// out, as a folder without it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/layouts.h"
#include "models/audio_vae/config.h"
#include "models/transformer/config.h"
#include "models/video_vae/model_configurator.h"

namespace {

using nlohmann::json;

// Runs one step; its own rejection (ltx::Error) ends it, anything else escapes.
template <typename F>
void attempt(F&& f) {
  try {
    f();
  } catch (const ltx::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace m = ltx::models;
  const char* const folders[] = {"transformer", "connectors", "vae",
                                 "audio_vae",   "vocoder",    "diffusion_decoder"};
  const std::vector<std::string> parts = ltx::fuzz::split_parts(data, size, 6);
  std::vector<std::pair<std::string, json>> configs;
  for (size_t i = 0; i < parts.size(); ++i) {
    json j = json::parse(parts[i], nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded()) configs.emplace_back(folders[i], std::move(j));
  }
  std::map<std::string, std::string> metadata;
  try {
    metadata = ltx::io::diffusers_metadata(configs, "fuzz");
  } catch (const ltx::Error&) {
    return 0;
  }
  json meta = json::object();
  meta["config"] = json::parse(metadata.at("config"));
  if (metadata.count("model_version")) meta["model_version"] = metadata.at("model_version");
  const json& config = meta["config"];
  using m::transformer::LTXModelType;
  for (LTXModelType type :
       {LTXModelType::AudioVideo, LTXModelType::VideoOnly, LTXModelType::AudioOnly})
    attempt([&] { (void)m::transformer::LTXModelConfig::from_metadata(meta, type, "fuzz"); });
  attempt([&] { (void)m::video_vae::encoder_config_from_metadata(meta, "fuzz"); });
  attempt([&] { (void)m::video_vae::decoder_config_from_metadata(meta, "fuzz"); });
  attempt([&] { (void)m::video_vae::diffusion_decoder_config_from_metadata(meta, "fuzz"); });
  attempt([&] { (void)m::audio_vae::AudioVaeConfig::from_config(config, "fuzz"); });
  attempt([&] { (void)m::audio_vae::VocoderConfig::from_config(config, "fuzz"); });
  return 0;
}
