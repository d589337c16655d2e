#pragma once
// The Gemma "assets" the reference reads besides the weights (GemmaAssets in
// ltx_core/text_encoders/gemma/gemma_assets.py): the HF config, tokenizer.json and the sidecar
// files (tokenizer_config.json, processor_config.json, chat_template.jinja, ...), from either
//
//   * a single-file text encoder (.safetensors): metadata "gemma_config" = the HF config JSON,
//     tensor "tokenizer_json" = the bytes of tokenizer.json (u8; int8 or wider integer storage is
//     converted byte-wise like numpy's astype(uint8)), tensors "hf_asset__<filename>" = sidecars;
//     older packs keep tokenizer_config.json, processor_config.json, chat_template.jinja and
//     generation_config.json as metadata strings instead;
//   * a Gemma root folder: config.json and tokenizer.json (first match, searching the folder
//     before its subfolders), every *.json / *.jinja file below it except those two as sidecars
//     (first file of a name wins, by sorted path), and the *.safetensors weight files next to the
//     first model*.safetensors;
//   * a llama.cpp Gemma 3 GGUF file (io/llama_gguf.h): the config rebuilt from its gemma3.*
//     metadata, the tokenizer from its vocabulary (models/text/gguf_tokenizer.h; tokenizer_json
//     stays empty), a tokenizer_config.json sidecar from its tokenizer.ggml.* ids and
//     tokenizer.chat_template; no vision tower and no processor config (llama.cpp keeps those in
//     a separate mmproj file).
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ltx::text {

struct GemmaAssets {
  std::string source;     // the path given
  nlohmann::json config;  // the HF config (null when a root folder has no config.json)
  std::string tokenizer_json;
  std::map<std::string, std::string> sidecars;  // file name -> bytes
  std::vector<std::string> weight_paths;        // the TE file itself, or the root's shards
  bool llama_gguf = false;  // a llama.cpp Gemma 3 GGUF (weight_paths = {the file})

  // A directory -> from_root, a .safetensors file -> from_single_file, a GGUF file -> from_gguf;
  // anything else throws.
  static GemmaAssets load(const std::string& path);
  static GemmaAssets from_gguf(const std::string& path);
  static GemmaAssets from_root(const std::string& dir);
  static GemmaAssets from_single_file(const std::string& path);

  bool has_sidecar(const std::string& name) const { return sidecars.count(name) != 0; }
  // Throws naming the source when absent.
  const std::string& sidecar(const std::string& name) const;
  nlohmann::json sidecar_json(const std::string& name) const;
  // What the reference requires before building a text encoder: tokenizer_config.json and
  // processor_config.json (not for a GGUF, which has no image processor), a config with
  // model_type, and at least one weight file.
  void require_encoder_assets() const;
};

// True when `path` names a regular file whose name ends in ".safetensors".
bool is_safetensors_file(const std::string& path);

}  // namespace ltx::text
