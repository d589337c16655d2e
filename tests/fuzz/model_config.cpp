// model_config: a checkpoint's `config` metadata (and `model_version`) through the configurators
// that read it: the transformer (the three model types), the video VAE encoder / decoder and the
// diffusion decoder, the audio VAE and the vocoder, the latent upsampler, the duration head; the
// same JSON as a Gemma HF config (text model, image processor) and the Gemma / LTX compatibility
// check. Not here: the text connectors' and the Gemma vision tower's configs, whose readers share
// their source files with the model code (linking them would build the ops).
//
// Input: the `config` value, NUL, the `model_version` value. They are stored as the metadata of
// an in-memory safetensors file and read back with SafetensorsFile::metadata_json(), so the
// values are decoded exactly as the loaders decode them.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/safetensors.h"
#include "models/audio_vae/config.h"
#include "models/duration_head/model_configurator.h"
#include "models/text/gemma/compat.h"
#include "models/text/gemma/config.h"
#include "models/text/gemma/image_processor.h"
#include "models/transformer/config.h"
#include "models/upsampler/model_configurator.h"
#include "models/video_vae/model_configurator.h"

namespace {

using nlohmann::json;

// A safetensors file with no tensors and `metadata`: the container the parsers' input comes in.
std::shared_ptr<const ltx::io::SafetensorsFile> metadata_file(const json& metadata) {
  const std::string header =
      json{{"__metadata__", metadata}}.dump(-1, ' ', false, json::error_handler_t::replace);
  std::vector<uint8_t> bytes(8 + header.size());
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  return ltx::io::SafetensorsFile::from_bytes("fuzz.safetensors", std::move(bytes));
}

// Runs one parser; its own rejection (ltx::Error) ends it, anything else escapes.
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
  const std::vector<std::string> parts = ltx::fuzz::split_parts(data, size, 2);
  json stored = {{"config", parts[0]}};
  if (!parts[1].empty()) stored["model_version"] = parts[1];
  std::shared_ptr<const ltx::io::SafetensorsFile> file;
  try {
    file = metadata_file(stored);
  } catch (const ltx::Error&) {
    return 0;
  }
  const json meta = file->metadata_json();
  const json config = file->metadata_json("config");
  const std::string src = file->path();

  using m::transformer::LTXModelType;
  for (LTXModelType type :
       {LTXModelType::AudioVideo, LTXModelType::VideoOnly, LTXModelType::AudioOnly})
    attempt([&] { (void)m::transformer::LTXModelConfig::from_metadata(meta, type, src); });
  attempt([&] { (void)m::video_vae::encoder_config_from_metadata(meta, src); });
  attempt([&] { (void)m::video_vae::decoder_config_from_metadata(meta, src); });
  attempt([&] { (void)m::video_vae::diffusion_decoder_config_from_metadata(meta, src); });
  attempt([&] { (void)m::audio_vae::AudioVaeConfig::from_config(config, src); });
  attempt([&] { (void)m::audio_vae::VocoderConfig::from_config(config, src); });
  attempt([&] { (void)m::upsampler::upsampler_config_from_metadata(meta, src); });
  attempt([&] { (void)m::duration_head::duration_head_config_from_metadata(meta, src); });

  // The same JSON read as a Gemma text encoder's HF config.
  attempt([&] { (void)ltx::text::GemmaImageProcessorConfig::from_json(config, src); });
  attempt([&] {
    const ltx::text::GemmaTextConfig gemma = ltx::text::GemmaTextConfig::from_json(config, src);
    (void)ltx::text::check_gemma_version(meta, src, gemma, src);
  });
  return 0;
}
