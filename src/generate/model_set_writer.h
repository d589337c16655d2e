#pragma once
// Model files with made-up values in the published layouts, from architecture configs: the
// built-in demo bundle (tiny configs) and full-size stand-ins for timing loads (`ltx bench
// write-models`: the LTX-2.3 22B checkpoint, Gemma 3 12B, the x2 upsampler).
//
// Which tensors a file holds is not listed anywhere: each component's own loader runs against a
// synthetic weight map, so the files get exactly the tensors the loaders bind, under the key
// names they read back. The files are written one tensor at a time (io::write_safetensors_streamed):
// a full-size checkpoint never sits in memory, and a failed write leaves no file.
//
//   checkpoint      single-file layout: transformer ("model.diffusion_model."), text connectors
//                   and projection, video VAE encoder + decoder ("vae."), audio VAE encoder +
//                   decoder ("audio_vae."), vocoder ("vocoder."); metadata `config` (the sections
//                   of ModelSetConfigs::checkpoint) and `model_version`
//   text encoder    single-file Gemma 3 ("language_model.model."), the demo's tokenizer and chat
//                   assets as u8 tensors, metadata `gemma_config`
//   upsampler       a latent upsampler, metadata `config`
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ltx::generate {

// The values of one file tensor, by its key in the file: a contiguous tensor of `shape` and
// `dtype` (any device). Called once per tensor, in file order.
using FileTensorValues =
    std::function<Tensor(const std::string& key, const Shape& shape, DType dtype)>;

// A file tensor's key and shape (what a LoRA for it needs).
using FileTensorShapes = std::vector<std::pair<std::string, Shape>>;

// Writes the single-file checkpoint. `config` holds the `transformer`, `vae`, `audio_vae` and
// `vocoder` sections (as the published files' metadata); `gemma_config` the text encoder's
// config.json (the connectors' input width comes from it). Floating tensors are bf16, as
// published. Returns the transformer's tensors ("model.diffusion_model." keys).
FileTensorShapes write_checkpoint_file(const std::string& path, const nlohmann::json& config,
                                       const std::string& model_version,
                                       const std::string& gemma_config,
                                       const FileTensorValues& values);

// Writes the single-file Gemma 3 text encoder for `gemma_config` (config.json text), its
// floating tensors in `dtype`, with the demo tokenizer (generate/demo_assets.h: a cut of Gemma
// 3's vocabulary; ids stay below any Gemma vocab_size).
void write_text_encoder_file(const std::string& path, const std::string& gemma_config, DType dtype,
                             const FileTensorValues& values);

// Writes a latent upsampler (`config`: its metadata config), bf16.
void write_upsampler_file(const std::string& path, const nlohmann::json& config,
                          const FileTensorValues& values);

}  // namespace ltx::generate
