#pragma once
// What a checkpoint file contains: the components inside (by key prefix, as the reference's key
// filters see them), the model family and version (from metadata: model_version, config sections,
// gemma_source_checkpoint, gemma_config, and the config flags that tell versions apart), parameter
// counts and dtypes per component, and the key config values. This is what `ltx inspect` prints.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace ltx::io {

struct ComponentSummary {
  // Stable identifier (used by --json): transformer, video_connector, audio_connector,
  // text_projection, gemma, tokenizer, video_vae_encoder, video_vae_decoder, diffusion_decoder,
  // video_vae_statistics, audio_vae_encoder, audio_vae_decoder, audio_vae_statistics, vocoder,
  // latent_upsampler, duration_head, lora, other.
  std::string id;
  std::string title;  // human-readable name
  int64_t tensors = 0;
  int64_t params = 0;  // sum of the tensors' element counts
  uint64_t bytes = 0;
  std::map<std::string, int64_t> dtype_tensors;  // dtype name ("bf16") -> tensors
  std::map<std::string, int64_t> dtype_params;   // dtype name -> elements
  // Key configuration values. Values the file's config omits appear at the reference's code
  // default and are listed in `defaulted`.
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  std::set<std::string> defaulted;
  std::vector<std::string> notes;
};

struct CheckpointSummary {
  std::string path;
  uint64_t file_size = 0;
  uint64_t header_size = 0;
  int64_t tensors = 0;
  int64_t params = 0;
  std::vector<std::string> metadata_keys;
  // What kind of file this is: "single-file checkpoint", "transformer", "text encoder",
  // "video VAE", "audio VAE + vocoder", "latent upsampler", "duration head", "LoRA", ...
  std::string layout;
  std::string family;                        // "LTX-2", "Gemma", "" when unknown
  std::string version;                       // short: "2", "2.3", "2.5", "2.3+", "" when unknown
  std::string version_name;                  // "LTX-2 (19B)", "LTX-2.3 (22B)", ..., "unknown"
  std::string version_source;                // the evidence the version was read from
  std::string model_version;                 // the raw `model_version` metadata, "" when absent
  std::vector<ComponentSummary> components;  // in a fixed order, only those present
  std::vector<std::string> warnings;

  const ComponentSummary* component(const std::string& id) const;
};

// Opens and validates `path` (throws ltx::Error naming the file when it is not a valid
// safetensors file) and describes it.
CheckpointSummary inspect_checkpoint(const std::string& path);
CheckpointSummary inspect_checkpoint(const SafetensorsFile& file);

// One JSON object per file (the elements of `ltx inspect --json`'s array).
nlohmann::ordered_json to_json(const CheckpointSummary& summary);
// The human-readable report of `ltx inspect` (several lines, ends with a newline).
std::string to_text(const CheckpointSummary& summary);

// Parses a model_version like the reference (detect_model_version): '-' counts as '.', and parsing
// stops at the first part that is not a plain integer; "" / garbage give {}.
std::vector<int> parse_model_version(const std::string& version);

}  // namespace ltx::io
