#include "generate/components.h"

#include <filesystem>
#include <map>
#include <memory>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/config.h"
#include "models/text/gemma/compat.h"
#include "models/text/gemma/config.h"
#include "models/text/gemma_assets.h"
#include "models/transformer/config.h"
#include "models/upsampler/model_configurator.h"
#include "models/video_vae/model_configurator.h"

namespace ltx::generate {

namespace {

// Header summaries, opened once per distinct file.
class Summaries {
 public:
  const io::CheckpointSummary& get(const std::string& path) {
    auto it = cache_.find(path);
    if (it == cache_.end()) it = cache_.emplace(path, io::inspect_checkpoint(path)).first;
    return it->second;
  }

 private:
  std::map<std::string, io::CheckpointSummary> cache_;
};

std::string listing(const io::CheckpointSummary& s) {
  std::string out;
  for (const auto& c : s.components) out += (out.empty() ? "" : ", ") + c.title;
  return out.empty() ? "no model components" : out;
}

// A component that must be in the file a flag named.
void require_component(Summaries& sums, const ComponentPath& slot, const char* id,
                       const std::string& what, const std::string& pipeline) {
  const io::CheckpointSummary& s = sums.get(slot.path);
  LTX_CHECK(s.component(id) != nullptr, slot.flag, " '", slot.path, "' has no ", what,
            " (the file holds: ", listing(s), "); the ", pipeline,
            " pipeline needs it: pass the right file");
}

// A slot the pipeline needs but no flag filled.
void require_given(const ComponentPath& slot, const std::string& what, const std::string& hint,
                   const std::string& pipeline) {
  LTX_CHECK(slot.given(), "the ", pipeline, " pipeline needs ", what, ": pass ", hint);
}

// An upsampler file's config, checked against the video VAE's latent width.
models::upsampler::LatentUpsamplerConfig upsampler_config(const ComponentPath& slot,
                                                          int64_t latent_channels) {
  const auto file = io::SafetensorsFile::open(slot.path);
  const auto up =
      models::upsampler::upsampler_config_from_metadata(file->metadata_json(), slot.path);
  LTX_CHECK(up.in_channels == latent_channels, slot.flag, " '", slot.path, "' upsamples ",
            up.in_channels, "-channel latents but the video VAE has ", latent_channels,
            "; the files belong to different models");
  return up;
}

}  // namespace

ComponentReport check_components(const ModelPaths& paths, const ComponentNeeds& needs) {
  const std::string& pl = needs.pipeline;
  const bool single = paths.layout == ModelPaths::Layout::SingleFile;
  require_given(paths.transformer, "the transformer",
                "--checkpoint-path (single-file checkpoint) or --transformer-path (split files)",
                pl);
  if (needs.text_encoder)
    require_given(paths.text_encoder, "the Gemma text encoder",
                  "--text-encoder-path (single-file text encoder) or --gemma-root (folder)", pl);
  require_given(paths.video_vae, "the video VAE",
                single ? "--video-vae-path" : "--video-vae-path (or a --checkpoint-path with it)",
                pl);
  require_given(paths.audio_vae, "the audio VAE and vocoder",
                "--audio-vae-path (or a --checkpoint-path with them)", pl);
  if (needs.spatial_upsampler)
    require_given(paths.spatial_upsampler, "the spatial latent upsampler",
                  "--spatial-upsampler-path (e.g. ltx-2.3-spatial-upscaler-x2-1.1.safetensors)",
                  pl);
  if (needs.temporal_upsampler)
    require_given(paths.temporal_upsampler, "the temporal latent upsampler (temporal rounds)",
                  "--temporal-upsampler-path", pl);
  if (needs.distilled_lora)
    LTX_CHECK(paths.distilled_lora.has_value(), "the ", pl,
              " pipeline needs the distilled LoRA for its second stage: pass --distilled-lora PATH "
              "[STRENGTH] (e.g. ltx-2.3-22b-distilled-lora-384.safetensors)");

  Summaries sums;
  ComponentReport r;
  require_component(sums, paths.transformer, "transformer", "diffusion transformer", pl);
  {
    const io::CheckpointSummary& s = sums.get(paths.transformer.path);
    r.model_version = s.model_version;
    r.version_name = s.version_name;
  }
  // Text connectors and projection: in the transformer file, or (LTX-2.5 split packs) partly in
  // the text-encoder file.
  for (const auto& [id, what] : {std::pair{"video_connector", "video text connector"},
                                 std::pair{"audio_connector", "audio text connector"},
                                 std::pair{"text_projection", "text projection"}}) {
    if (!needs.text_encoder) break;
    bool found = false;
    for (const std::string& p : paths.embeddings_weight_paths)
      found = found || sums.get(p).component(id) != nullptr;
    // text::PromptEncoder also reads a single-file text encoder when no file has the projection.
    std::error_code ec;
    if (!found && std::filesystem::is_regular_file(paths.text_encoder.path, ec))
      found = sums.get(paths.text_encoder.path).component(id) != nullptr;
    LTX_CHECK(found, paths.transformer.flag, " '", paths.transformer.path, "' has no ", what,
              single ? "" : " (nor has --text-encoder-path or --text-connectors-path)",
              single ? "; is this a full LTX-2 checkpoint or transformer file?"
                     : "; is this a full LTX-2 transformer file? A transformer-only file (a "
                       "community GGUF) needs the connectors' file: pass --text-connectors-path");
  }
  // The video decoder is chosen from the VAE file's metadata, like the reference: the
  // convolutional VAE or LTX-2.5's diffusion decoder.
  const auto vae_file = io::SafetensorsFile::open(paths.video_vae.path);
  const nlohmann::json vae_meta = vae_file->metadata_json();
  const bool diffusion_vae = models::video_vae::is_diffusion_video_vae(vae_meta);
  if (diffusion_vae)
    require_component(sums, paths.video_vae, "diffusion_decoder",
                      "video diffusion decoder (its config.vae names a diffusion VAE, LTX-2.5)",
                      pl);
  else
    require_component(sums, paths.video_vae, "video_vae_decoder", "video VAE decoder", pl);
  if (needs.video_encoder)
    require_component(sums, paths.video_vae, "video_vae_encoder",
                      "video VAE encoder (needed for image conditioning and latent upsampling)",
                      pl);
  require_component(sums, paths.audio_vae, "audio_vae_decoder", "audio VAE decoder", pl);
  require_component(sums, paths.audio_vae, "vocoder", "vocoder", pl);
  if (needs.spatial_upsampler)
    require_component(sums, paths.spatial_upsampler, "latent_upsampler", "latent upsampler", pl);
  if (needs.temporal_upsampler)
    require_component(sums, paths.temporal_upsampler, "latent_upsampler", "latent upsampler", pl);
  if (needs.distilled_lora)
    require_component(sums, {paths.distilled_lora->path, "--distilled-lora"}, "lora", "LoRA", pl);
  if (paths.detailing_lora)
    require_component(sums, {paths.detailing_lora->path, "--detailing-lora"}, "lora", "LoRA", pl);
  for (const LoraSpec& l : paths.loras)
    require_component(sums, {l.path, "--lora"}, "lora", "LoRA", pl);

  // Agreement between the files (configs only).
  // Safetensors or GGUF (the community quantizations carry the config as a string value).
  const nlohmann::json transformer_meta = io::checkpoint_metadata_json(paths.transformer.path);
  const auto dit = models::transformer::LTXModelConfig::from_metadata(
      transformer_meta, models::transformer::LTXModelType::AudioVideo, paths.transformer.path);
  int64_t latent_channels = 0;
  models::tiling::ScaleFactors vae_scale;
  if (diffusion_vae) {
    const auto dd = models::video_vae::diffusion_decoder_config_from_metadata(
        vae_meta, paths.video_vae.path);
    latent_channels = dd.in_channels;
    // The upsamples' strides and the final patch make the decoder's scale.
    vae_scale = {1, dd.patch_size, dd.patch_size};
    for (const auto& u : dd.upsamples) {
      vae_scale.time *= u.stride[0];
      vae_scale.height *= u.stride[1];
      vae_scale.width *= u.stride[2];
    }
  } else {
    const auto dec =
        models::video_vae::decoder_config_from_metadata(vae_meta, paths.video_vae.path);
    latent_channels = dec.latent_channels;
    vae_scale = dec.scale_factors();
  }
  r.video_latent_channels = latent_channels;
  LTX_CHECK(dit.in_channels == latent_channels && dit.out_channels == latent_channels,
            "the transformer (", paths.transformer.flag, " '", paths.transformer.path,
            "') works on ", dit.in_channels, "-channel video latents but the video VAE (",
            paths.video_vae.flag, " '", paths.video_vae.path, "') has ", latent_channels,
            "; the files belong to different models");
  LTX_CHECK(vae_scale == models::tiling::kVideoScaleFactors, paths.video_vae.flag, " '",
            paths.video_vae.path, "': the video VAE ", diffusion_vae ? "(diffusion decoder) " : "",
            "compresses by ", vae_scale.time, "x", vae_scale.height, "x", vae_scale.width,
            " (frames x height x width); the pipelines need 8x32x32");

  const auto audio_file = io::SafetensorsFile::open(paths.audio_vae.path);
  const nlohmann::json audio_meta = audio_file->metadata_json();
  const nlohmann::json audio_config =
      audio_meta.contains("config") ? audio_meta["config"] : nlohmann::json::object();
  const auto acfg =
      models::audio_vae::AudioVaeConfig::from_config(audio_config, paths.audio_vae.path);
  const auto vcfg =
      models::audio_vae::VocoderConfig::from_config(audio_config, paths.audio_vae.path);
  LTX_CHECK(acfg.mel_bins.has_value(), paths.audio_vae.flag, " '", paths.audio_vae.path,
            "': the audio VAE config gives no mel bin count");
  r.audio_latent_channels = acfg.z_channels;
  r.audio_mel_bins = *acfg.mel_bins / models::audio_vae::kLatentDownsampleFactor;
  r.audio_sample_rate = vcfg.output_sampling_rate();
  const int64_t audio_width = r.audio_latent_channels * r.audio_mel_bins;
  LTX_CHECK(dit.audio_in_channels == audio_width && dit.audio_out_channels == audio_width,
            "the transformer (", paths.transformer.flag, " '", paths.transformer.path,
            "') works on ", dit.audio_in_channels, "-wide audio latents but the audio VAE (",
            paths.audio_vae.flag, " '", paths.audio_vae.path, "') makes ", r.audio_latent_channels,
            " x ", r.audio_mel_bins, " = ", audio_width, "; the files belong to different models");

  if (needs.spatial_upsampler) {
    const auto up = upsampler_config(paths.spatial_upsampler, latent_channels);
    LTX_CHECK(up.spatial_upsample && !up.temporal_upsample && up.spatial_scale == 2.0,
              "--spatial-upsampler-path '", paths.spatial_upsampler.path,
              "' is not a spatial x2 upsampler (the two-stage pipelines double the resolution)");
  }
  if (needs.temporal_upsampler) {
    const auto up = upsampler_config(paths.temporal_upsampler, latent_channels);
    LTX_CHECK(up.temporal_upsample && !up.spatial_upsample, "--temporal-upsampler-path '",
              paths.temporal_upsampler.path, "' is not a temporal-only x2 upsampler");
  }

  if (!needs.text_encoder) return r;
  // The reference's Gemma version rule.
  const text::GemmaAssets assets = text::GemmaAssets::load(paths.text_encoder.path);
  LTX_CHECK(!assets.config.is_null(), paths.text_encoder.flag, " '", paths.text_encoder.path,
            "' has no Gemma config; is it a Gemma text encoder?");
  const text::GemmaTextConfig gemma =
      text::GemmaTextConfig::from_json(assets.config, paths.text_encoder.path);
  const text::GemmaCompatibility compat = text::check_gemma_version(
      transformer_meta, paths.transformer.path, gemma, paths.text_encoder.path);
  r.warnings.insert(r.warnings.end(), compat.warnings.begin(), compat.warnings.end());
  return r;
}

}  // namespace ltx::generate
