#pragma once
// Where each model component of a generation comes from, as the command line names them (the
// reference's ModelPaths / model_paths_from_namespace, ltx_pipelines/utils/model_paths.py):
//
//   * single-file ("monolith") layout: --checkpoint-path (or --distilled-checkpoint-path) holds the
//     transformer, the text connectors + projection, the video VAE and the audio VAE + vocoder;
//     --video-vae-path may override the video VAE;
//   * split layout: --transformer-path, --video-vae-path, --audio-vae-path, each a file of its own;
//
// and in both the Gemma text encoder from --text-encoder-path (a single-file text encoder) or
// --gemma-root (a Hugging Face folder), the latent upsamplers from --spatial-upsampler-path /
// --temporal-upsampler-path, LoRAs from --lora / --distilled-lora / --detailing-lora. A slot no
// flag fills stays empty; which slots a pipeline needs is checked by check_components()
// (generate/components.h), with errors that name the flag to pass.
#include <optional>
#include <string>
#include <vector>

#include "models/lora/lora.h"
#include "quantization/mode.h"

namespace ltx::generate {

using LoraSpec = lora::LoraSpec;  // PATH [STRENGTH]

// The raw flags (empty = not given).
struct ModelFlags {
  std::string checkpoint_path;
  std::string distilled_checkpoint_path;
  std::string transformer_path;
  std::string text_encoder_path;
  std::string gemma_root;
  std::string video_vae_path;
  std::string audio_vae_path;
  std::string spatial_upsampler_path;
  std::string temporal_upsampler_path;  // DFR temporal rounds
  std::string duration_head_path;       // split layout (LTX-2.5)
  std::string text_connectors_path;     // split layout: connectors the transformer file lacks
  std::vector<LoraSpec> loras;
  std::optional<LoraSpec> distilled_lora;
  std::optional<LoraSpec> detailing_lora;  // DFR stage 2
  // --quantization: how the transformer's Linears are stored (quantization/mode.h).
  quantization::Mode quantization = quantization::Mode::None;

  // True when no flag names a model file (the built-in demo runs then).
  bool empty() const;
};

// One component's file and the flag it came from (for messages).
struct ComponentPath {
  std::string path;  // empty: not given
  std::string flag;  // "--checkpoint-path", "--video-vae-path", ...
  bool given() const { return !path.empty(); }
};

struct ModelPaths {
  enum class Layout { SingleFile, Split };
  Layout layout = Layout::SingleFile;

  ComponentPath transformer;   // DiT (+ connectors in the single-file layout)
  ComponentPath text_encoder;  // Gemma: a .safetensors file or a folder
  ComponentPath video_vae;
  ComponentPath audio_vae;  // audio VAE + vocoder
  ComponentPath spatial_upsampler;
  ComponentPath temporal_upsampler;
  ComponentPath duration_head;  // the checkpoint (single file) or --duration-head-path
  std::vector<LoraSpec> loras;
  std::optional<LoraSpec> distilled_lora;
  std::optional<LoraSpec> detailing_lora;
  quantization::Mode quantization = quantization::Mode::None;  // the transformer's (ModelFlags)
  // The files the text connectors and projection are read from (the reference's
  // embeddings_weight_paths): the transformer file, then --text-connectors-path, and in the split
  // layout a single-file text encoder after them (LTX-2.5 split packs keep the projection there).
  // The config comes from the first.
  std::vector<std::string> embeddings_weight_paths;

  const char* layout_name() const {
    return layout == Layout::SingleFile ? "single-file checkpoint" : "split files";
  }
};

// Builds the paths from the flags. Throws an ltx::Error naming the flags when they contradict
// each other (both --checkpoint-path and --distilled-checkpoint-path; a single-file checkpoint
// with --transformer-path or --audio-vae-path; both --text-encoder-path and --gemma-root) or name
// a path that does not exist.
ModelPaths resolve_model_paths(const ModelFlags& flags);

}  // namespace ltx::generate
