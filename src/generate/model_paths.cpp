#include "generate/model_paths.h"

#include <filesystem>

#include "core/error.h"
#include "io/layouts.h"

namespace ltx::generate {

namespace {

void require_exists(const std::string& path, const std::string& flag) {
  if (path.empty()) return;
  std::error_code ec;
  LTX_CHECK(std::filesystem::exists(path, ec), flag, ": '", path, "' does not exist");
}

bool is_regular_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace

bool ModelFlags::empty() const {
  return checkpoint_path.empty() && distilled_checkpoint_path.empty() && transformer_path.empty() &&
         text_encoder_path.empty() && gemma_root.empty() && video_vae_path.empty() &&
         audio_vae_path.empty() && spatial_upsampler_path.empty() && loras.empty() &&
         text_connectors_path.empty() &&
         !distilled_lora;
}

ModelPaths resolve_model_paths(const ModelFlags& f) {
  LTX_CHECK(f.checkpoint_path.empty() || f.distilled_checkpoint_path.empty(),
            "--checkpoint-path and --distilled-checkpoint-path both name a single-file checkpoint; "
            "pass one of them");
  LTX_CHECK(f.text_encoder_path.empty() || f.gemma_root.empty(),
            "--text-encoder-path and --gemma-root both name the Gemma text encoder; pass one of "
            "them");
  const bool distilled = !f.distilled_checkpoint_path.empty();
  const std::string checkpoint = distilled ? f.distilled_checkpoint_path : f.checkpoint_path;
  const std::string checkpoint_flag =
      distilled ? "--distilled-checkpoint-path" : "--checkpoint-path";
  if (!checkpoint.empty()) {
    for (const auto& [value, flag] : {std::pair{f.transformer_path, "--transformer-path"},
                                      std::pair{f.audio_vae_path, "--audio-vae-path"},
                                      std::pair{f.text_connectors_path, "--text-connectors-path"}})
      LTX_CHECK(value.empty(), flag, " (split layout) cannot be combined with ", checkpoint_flag,
                " (single-file checkpoint); pass either the checkpoint or the split files "
                "(--video-vae-path may override the checkpoint's video VAE)");
  }

  const std::vector<std::pair<const std::string*, const char*>> all = {
      {&f.checkpoint_path, "--checkpoint-path"},
      {&f.distilled_checkpoint_path, "--distilled-checkpoint-path"},
      {&f.transformer_path, "--transformer-path"},
      {&f.text_encoder_path, "--text-encoder-path"},
      {&f.gemma_root, "--gemma-root"},
      {&f.video_vae_path, "--video-vae-path"},
      {&f.audio_vae_path, "--audio-vae-path"},
      {&f.spatial_upsampler_path, "--spatial-upsampler-path"},
      {&f.temporal_upsampler_path, "--temporal-upsampler-path"},
      {&f.duration_head_path, "--duration-head-path"},
      {&f.text_connectors_path, "--text-connectors-path"}};
  for (const auto& [value, flag] : all) require_exists(*value, flag);
  for (const LoraSpec& l : f.loras) require_exists(l.path, "--lora");
  if (f.distilled_lora) require_exists(f.distilled_lora->path, "--distilled-lora");
  if (f.detailing_lora) require_exists(f.detailing_lora->path, "--detailing-lora");

  ModelPaths p;
  p.quantization = f.quantization;
  if (!checkpoint.empty()) {
    p.layout = ModelPaths::Layout::SingleFile;
    p.transformer = {checkpoint, checkpoint_flag};
    p.video_vae = f.video_vae_path.empty() ? ComponentPath{checkpoint, checkpoint_flag}
                                           : ComponentPath{f.video_vae_path, "--video-vae-path"};
    p.audio_vae = {checkpoint, checkpoint_flag};
    p.duration_head = f.duration_head_path.empty()
                          ? ComponentPath{checkpoint, checkpoint_flag}
                          : ComponentPath{f.duration_head_path, "--duration-head-path"};
  } else {
    p.layout = ModelPaths::Layout::Split;
    p.transformer = {f.transformer_path, "--transformer-path"};
    p.video_vae = {f.video_vae_path, "--video-vae-path"};
    p.audio_vae = {f.audio_vae_path, "--audio-vae-path"};
    p.duration_head = {f.duration_head_path, "--duration-head-path"};
  }
  if (!f.text_encoder_path.empty())
    p.text_encoder = {f.text_encoder_path, "--text-encoder-path"};
  else if (!f.gemma_root.empty() || checkpoint.empty() || !io::is_diffusers_folder(checkpoint))
    p.text_encoder = {f.gemma_root, "--gemma-root"};
  else
    p.text_encoder = {checkpoint, checkpoint_flag};  // a Diffusers folder's text_encoder/
  p.spatial_upsampler = {f.spatial_upsampler_path, "--spatial-upsampler-path"};
  p.temporal_upsampler = {f.temporal_upsampler_path, "--temporal-upsampler-path"};
  p.loras = f.loras;
  p.distilled_lora = f.distilled_lora;
  p.detailing_lora = f.detailing_lora;
  if (p.transformer.given()) p.embeddings_weight_paths.push_back(p.transformer.path);
  if (!f.text_connectors_path.empty()) p.embeddings_weight_paths.push_back(f.text_connectors_path);
  if (p.layout == ModelPaths::Layout::Split && p.text_encoder.given() &&
      is_regular_file(p.text_encoder.path) && p.transformer.given())
    p.embeddings_weight_paths.push_back(p.text_encoder.path);
  return p;
}

}  // namespace ltx::generate
