#include "hub/presets.h"

#include "core/error.h"

namespace ltx::hub {

namespace {

// Repositories (huggingface.co/<id>) and the notes `ltx models` shows with them.
constexpr std::string_view kLtx2 = "Lightricks/LTX-2";
constexpr std::string_view kLtx23 = "Lightricks/LTX-2.3";
constexpr std::string_view kLtx23Fp8 = "Lightricks/LTX-2.3-fp8";
constexpr std::string_view kLtx25 = "Lightricks/LTX-2.5";
// The Gemma 3 folder the LTX-2 and LTX-2.3 READMEs name ("download all assets from the
// repository"); LTX-2.5 ships its own Gemma 4 text encoder file.
constexpr std::string_view kGemma3 = "google/gemma-3-12b-it-qat-q4_0-unquantized";

constexpr std::string_view kLtx2Licence =
    "LTX-2 Community License Agreement: free to use; entities with annual revenues of $10M or "
    "more need a paid commercial licence from Lightricks. Gemma 3: Google's Gemma Terms of Use, "
    "a gated repository (accept the terms on its page, then --token or HF_TOKEN)";
constexpr std::string_view kLtx25Licence =
    "LTX-2.x Community License Agreement: free to use; entities with annual revenues of $10M or "
    "more need a paid commercial licence from Lightricks; accept the terms on the model page "
    "(then --token or HF_TOKEN) if the hub answers 401/403";

constexpr std::string_view kDevPipelines =
    "two-stage, two-stage-hq, one-stage, keyframe-interpolation, a2vid, t2a";
constexpr std::string_view kDistilledPipelines =
    "distilled, retake; with an IC-LoRA (--lora): ic-lora, dubit, hdr-ic-lora";

std::vector<PresetFile> ltx23_dev_files(std::string_view repo, std::string_view checkpoint) {
  return {{Role::Checkpoint, repo, checkpoint},
          {Role::GemmaRoot, kGemma3, ""},
          {Role::SpatialUpsampler, kLtx23, "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"},
          {Role::DistilledLora, kLtx23, "ltx-2.3-22b-distilled-lora-384-1.1.safetensors"}};
}

std::vector<PresetFile> ltx23_distilled_files(std::string_view repo, std::string_view checkpoint) {
  return {{Role::Checkpoint, repo, checkpoint},
          {Role::GemmaRoot, kGemma3, ""},
          {Role::SpatialUpsampler, kLtx23, "ltx-2.3-spatial-upscaler-x2-1.1.safetensors"}};
}

std::vector<PresetFile> ltx2_files(std::string_view checkpoint, bool dev) {
  std::vector<PresetFile> f = {{Role::Checkpoint, kLtx2, checkpoint},
                               {Role::GemmaRoot, kGemma3, ""},
                               {Role::SpatialUpsampler, kLtx2, "ltx-2-spatial-upscaler-x2-1.0.safetensors"}};
  if (dev) f.push_back({Role::DistilledLora, kLtx2, "ltx-2-19b-distilled-lora-384.safetensors"});
  return f;
}

std::vector<PresetFile> ltx25_files(bool dev) {
  std::vector<PresetFile> f = {
      {Role::Transformer, kLtx25,
       dev ? "diffusion_models/ltx-2.5-22b-dev-transformer-bf16.safetensors"
           : "diffusion_models/ltx-2.5-22b-distilled-transformer-bf16.safetensors"},
      {Role::TextEncoder, kLtx25, "text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"},
      {Role::VideoVae, kLtx25, "vae/ltx-2.5-video-vae-bf16.safetensors"},
      {Role::AudioVae, kLtx25, "vae/ltx-2.5-audio-vae-bf16.safetensors"},
      {Role::SpatialUpsampler, kLtx25,
       "latent_upscale_models/ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"}};
  if (dev) {
    f.push_back({Role::TemporalUpsampler, kLtx25,
                 "latent_upscale_models/ltx-2.5-latent-temporal-upscaler-x2-bf16-1.0.safetensors"});
    f.push_back({Role::DistilledLora, kLtx25, "loras/ltx-2.5-22b-distilled-lora-450-bf16.safetensors"});
  }
  return f;
}

}  // namespace

const char* role_flag(Role role) {
  switch (role) {
    case Role::Checkpoint: return "--checkpoint-path";
    case Role::Transformer: return "--transformer-path";
    case Role::TextEncoder: return "--text-encoder-path";
    case Role::GemmaRoot: return "--gemma-root";
    case Role::VideoVae: return "--video-vae-path";
    case Role::AudioVae: return "--audio-vae-path";
    case Role::SpatialUpsampler: return "--spatial-upsampler-path";
    case Role::TemporalUpsampler: return "--temporal-upsampler-path";
    case Role::DistilledLora: return "--distilled-lora";
  }
  return "?";
}

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = {
      {"ltx-2.3-distilled", "LTX-2.3 22B, distilled (8 + 3 steps, no guidance)", "distilled",
       kDistilledPipelines, "", kLtx2Licence,
       ltx23_distilled_files(kLtx23, "ltx-2.3-22b-distilled-1.1.safetensors")},
      {"ltx-2.3-dev", "LTX-2.3 22B, full model (guided; the distilled LoRA refines stage 2)",
       "two-stage", kDevPipelines, "", kLtx2Licence,
       ltx23_dev_files(kLtx23, "ltx-2.3-22b-dev.safetensors")},
      {"ltx-2.3-dev-fp8", "LTX-2.3 22B, full model, pre-quantised FP8 weights (Lightricks/LTX-2.3-fp8)",
       "two-stage", kDevPipelines, "fp8-cast", kLtx2Licence,
       ltx23_dev_files(kLtx23Fp8, "ltx-2.3-22b-dev-fp8.safetensors")},
      {"ltx-2.3-distilled-fp8", "LTX-2.3 22B, distilled, pre-quantised FP8 weights (Lightricks/LTX-2.3-fp8)",
       "distilled", kDistilledPipelines, "fp8-cast", kLtx2Licence,
       ltx23_distilled_files(kLtx23Fp8, "ltx-2.3-22b-distilled-fp8.safetensors")},
      {"ltx-2.5-distilled", "LTX-2.5 22B, distilled, split files with its Gemma 4 text encoder",
       "distilled", kDistilledPipelines, "", kLtx25Licence, ltx25_files(false)},
      {"ltx-2.5-dev", "LTX-2.5 22B, full model, split files (+ temporal upscaler, distilled LoRA)",
       "two-stage", "two-stage, two-stage-hq, one-stage, dfr, keyframe-interpolation, a2vid, t2a",
       "", kLtx25Licence, ltx25_files(true)},
      {"ltx-2", "LTX-2 19B, full model (guided; the distilled LoRA refines stage 2)", "two-stage",
       kDevPipelines, "", kLtx2Licence, ltx2_files("ltx-2-19b-dev.safetensors", true)},
      {"ltx-2-distilled", "LTX-2 19B, distilled", "distilled", kDistilledPipelines, "",
       kLtx2Licence, ltx2_files("ltx-2-19b-distilled.safetensors", false)},
      {"ltx-2-dev-fp8", "LTX-2 19B, full model, pre-quantised FP8 weights", "two-stage",
       kDevPipelines, "fp8-cast", kLtx2Licence, ltx2_files("ltx-2-19b-dev-fp8.safetensors", true)},
      {"ltx-2-distilled-fp8", "LTX-2 19B, distilled, pre-quantised FP8 weights", "distilled",
       kDistilledPipelines, "fp8-cast", kLtx2Licence,
       ltx2_files("ltx-2-19b-distilled-fp8.safetensors", false)},
  };
  return table;
}

const Preset* find_preset(std::string_view name) {
  for (const Preset& p : presets())
    if (p.name == name) return &p;
  return nullptr;
}

const Preset& preset(std::string_view name, const std::string& flag) {
  if (const Preset* p = find_preset(name)) return *p;
  std::string names;
  for (const Preset& p : presets()) names += (names.empty() ? "" : ", ") + std::string(p.name);
  fail(flag, " '", name, "' is no model preset; the presets are ", names,
       " (`ltx models` describes them)");
}

}  // namespace ltx::hub
