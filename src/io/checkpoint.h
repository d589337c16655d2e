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

#include "io/gguf.h"
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

// The tensors of one GGML storage type in a GGUF file.
struct StorageTypeSummary {
  std::string type;  // "Q4_K", "F32", ...
  int64_t tensors = 0;
  int64_t params = 0;
  uint64_t bytes = 0;
  double bits_per_weight = 0;  // 8 * bytes / params
};

struct CheckpointSummary {
  std::string path;
  std::string format = "safetensors";  // or "GGUF"
  uint64_t file_size = 0;
  uint64_t header_size = 0;  // GGUF: the data section's offset
  // GGUF only: the version, the alignment, general.architecture ("ltxv" for the community LTX
  // files), the prefix put back on bare transformer keys to recognise them ("model.diffusion_model."
  // for ComfyUI-GGUF files, "" when the names carry it), the storage types (largest first) and
  // the bits per weight over every tensor.
  uint32_t gguf_version = 0;
  uint32_t gguf_alignment = 0;
  std::string architecture;
  std::string key_prefix_added;
  // How the GGUF's names are read when they are not LTX's: "llama.cpp Gemma 3" (io/llama_gguf.h),
  // "" otherwise.
  std::string gguf_layout;
  // safetensors: how the file(s) are laid out ("official safetensors", "Diffusers folder",
  // "ComfyUI FP8 (scaled)": io/layouts.h); storage_types and bits_per_weight by dtype.
  std::string source_layout;
  std::vector<StorageTypeSummary> storage_types;
  double bits_per_weight = 0;
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

// Opens and validates `path` (GGUF when it starts with the GGUF magic, safetensors otherwise;
// throws ltx::Error naming the file when it is not valid) and describes it.
CheckpointSummary inspect_checkpoint(const std::string& path);
CheckpointSummary inspect_checkpoint(const SafetensorsFile& file);
// GGUF files: the string metadata plays the part of safetensors' __metadata__ (config,
// model_version); tensor names are classified as in a safetensors checkpoint, with
// "model.diffusion_model." put back on the bare transformer keys that ComfyUI-GGUF writes.
CheckpointSummary inspect_checkpoint(const GgufFile& file);

// One JSON object per file (the elements of `ltx inspect --json`'s array).
nlohmann::ordered_json to_json(const CheckpointSummary& summary);
// The human-readable report of `ltx inspect` (several lines, ends with a newline).
std::string to_text(const CheckpointSummary& summary);

// Parses a model_version like the reference (detect_model_version): '-' counts as '.', and parsing
// stops at the first part that is not a plain integer; "" / garbage give {}.
std::vector<int> parse_model_version(const std::string& version);

}  // namespace ltx::io
