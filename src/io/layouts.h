#pragma once
// The layouts users have, seen as the official single-file checkpoint.
//
// The models bind the reference's names (`model.diffusion_model.*`, `vae.*`, `audio_vae.*`,
// `vocoder.*`, `text_embedding_projection.*`) and read its `config` metadata. Files written in
// another layout are opened as a SafetensorsFile view under those names, so nothing above io/
// knows the layout: the key maps below are data (tables of renames), not code paths in models.
//
//   * Diffusers folder (`model_index.json` + one folder per component, each with config.json and
//     `diffusion_pytorch_model.safetensors` or shards listed by
//     `diffusion_pytorch_model.safetensors.index.json`): transformer, connectors, vae, audio_vae
//     and vocoder renamed back to the official names (the inverse of diffusers'
//     scripts/convert_ltx2_to_diffusers.py) and their config.json files translated into the
//     official `config` sections; the duration head's split pooler projection is concatenated
//     back. LTX-2.5's `diffusion_decoder/` (LTX2VideoDiffusionDecoderModel), when present, is the
//     video decoder: the view is then the official diffusion VAE (`vae.encoder.*` from `vae/`,
//     `vae.decoder.*` and the statistics from `diffusion_decoder/`, its split q/k/v concatenated
//     back into `qkv`, config.vae a CausalDiffusionVAE); `vae/`'s conv decoder is left out. A Diffusers latent upsampler folder (config.json of LTX2LatentUpsamplerModel) reads
//     as the official upsampler file. The text encoder stays a Gemma folder (`text_encoder/`, with
//     `tokenizer/` beside it): --gemma-root DIR reads it.
//   * ComfyUI files: FP8 weights with the ComfyUI scale names (`scaled_fp8` marker +
//     `.scale_weight` / `.scale_input`, or `.comfy_quant` markers + `.weight_scale` /
//     `.input_scale`) renamed to the official pre-quantised FP8 names (`.weight_scale`,
//     `.input_scale`; markers dropped, an input scale of exactly 1 dropped as ComfyUI does).
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"

namespace ltx::io {

// A Diffusers folder (model_index.json) as the official single-file checkpoint, or a Diffusers
// latent upsampler folder as the official upsampler file. Throws one
// ltx::Error naming the file and the fix for a folder that is not one, a missing component
// folder, config or shard, an index naming a tensor its shard lacks, or a config this code cannot
// translate.
std::shared_ptr<const SafetensorsFile> open_layout_folder(const std::string& dir);

// The official metadata (`config`, and `model_version` where the settings tell it) of a Diffusers
// pipeline from its components' config.json values (folder -> parsed JSON, in
// diffusers_components() order); `dir` names the files in errors. Throws one ltx::Error for a
// setting the official config cannot express or a value of the wrong type.
std::map<std::string, std::string> diffusers_metadata(
    const std::vector<std::pair<std::string, nlohmann::json>>& configs, const std::string& dir);

// `file` itself, or a view of it under the official names when it is in a ComfyUI layout.
std::shared_ptr<const SafetensorsFile> adapt_file_layout(
    std::shared_ptr<const SafetensorsFile> file);

// True when `dir` has a model_index.json (a Diffusers pipeline folder).
bool is_diffusers_folder(const std::string& dir);

// One rename of a layout's key map: a key starting with `from` (prefix) or containing it
// (substring, every occurrence) gets `to` there instead.
struct KeyRename {
  std::string from;
  std::string to;
  bool prefix = true;
};

// How one Diffusers component maps back: its folder and its key map, stages applied in order to
// each key; in a stage the first rename that matches applies (so a table of block moves renames
// each key once). The last stage adds the official prefix. Exposed for the docs table and tests.
struct DiffusersComponent {
  std::string folder;       // "transformer"
  std::string description;  // "the DiT (LTX2VideoTransformer3DModel)"
  std::vector<std::vector<KeyRename>> stages;
  // Read when its folder is there even if model_index.json does not list it (diffusers saves
  // LTX-2.5's diffusion decoder beside the pipeline, loaded by subfolder).
  bool read_unlisted = false;
  // When this component is read, the Diffusers keys of `replaces_folder` that start with one of
  // `replaces_prefixes` are left out (the official file holds one video decoder).
  std::string replaces_folder;
  std::vector<std::string> replaces_prefixes;
};
const std::vector<DiffusersComponent>& diffusers_components();

// A tensor diffusers split that the official file stores whole: the parts (Diffusers keys of one
// component) concatenated along the first dimension give `official`. With `by_suffix`, parts and
// `official` are key endings: every key ending in parts[0] starts a group, its siblings share the
// key's beginning, and `official` (a Diffusers name ending) is renamed by the component's table.
struct DiffusersConcat {
  std::string folder;
  std::vector<std::string> parts;
  std::string official;
  bool by_suffix = false;
};
const std::vector<DiffusersConcat>& diffusers_concats();
// The official name of Diffusers key `key` of `component` (applies its renames).
std::string diffusers_to_official(const DiffusersComponent& component, const std::string& key);

}  // namespace ltx::io
