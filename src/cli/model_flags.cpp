#include "cli/model_flags.h"

#include <type_traits>

#include "core/error.h"
#include "generate/memory_budget.h"

namespace ltx::cli {

namespace {

template <typename T>
T parse_value(const std::string& s, const std::string& what) {
  size_t used = 0;
  T v{};
  try {
    if constexpr (std::is_floating_point_v<T>)
      v = static_cast<T>(std::stod(s, &used));
    else
      v = static_cast<T>(std::stoll(s, &used));
  } catch (const std::exception&) {
    used = 0;
  }
  LTX_CHECK(used == s.size() && used > 0, what, ": '", s, "' is not ",
            std::is_floating_point_v<T> ? "a number" : "an integer");
  return v;
}

generate::LoraSpec parse_lora(const std::vector<std::string>& v, const char* flag) {
  LTX_CHECK(v.size() == 1 || v.size() == 2, flag, " takes PATH [STRENGTH], got ", v.size(),
            " values");
  generate::LoraSpec l;
  l.path = v[0];
  if (v.size() == 2) l.strength = parse_number(v[1], str(flag, " ", v[0], " STRENGTH"));
  return l;
}

}  // namespace

double parse_number(const std::string& s, const std::string& what) {
  return parse_value<double>(s, what);
}
int64_t parse_integer(const std::string& s, const std::string& what) {
  return parse_value<int64_t>(s, what);
}

void add_model_flags(CLI::App* sub, ModelFlagsCli& c) {
  generate::ModelFlags& m = c.models;
  c.sub = sub;
  sub->add_option("--model", c.model,
                  "A model preset (`ltx models` lists them, e.g. ltx-2.3-distilled): its files from "
                  "the model cache, downloaded first when missing (asking, unless --yes), and its "
                  "default --pipeline and --quantization; explicit model flags replace its parts");
  add_hub_flags(sub, c.hub, true);
  sub->add_option("--device", c.device,
                  "cpu (default) or cuda[:N]: where every model runs (bf16 weights on CUDA, f32 "
                  "on the CPU)");
  sub->add_option("--max-gpu-memory", c.max_gpu_memory, kMaxGpuMemoryHelp);
  sub->add_option("--offload", c.offload,
                  "Where the transformer's blocks and Gemma's layers wait between uses: none "
                  "(all weights on the GPU; the default without --max-gpu-memory), cpu (in "
                  "page-locked host memory, copied to the GPU one by one while the previous one "
                  "computes; GPU memory for the rest of each model plus two blocks), disk (read "
                  "from the model files at every pass through two page-locked staging buffers: "
                  "the least host memory) or auto (the default with --max-gpu-memory: each model "
                  "resident when it fits the budget with its stage's activations, else its first "
                  "blocks resident and the rest streamed from host memory; the plan is logged). "
                  "Needs --device cuda");
  sub->add_option("--checkpoint-path", m.checkpoint_path,
                  "Single-file LTX-2 checkpoint: transformer, text connectors, video and audio "
                  "VAEs, vocoder");
  sub->add_option("--distilled-checkpoint-path", m.distilled_checkpoint_path,
                  "Single-file distilled checkpoint (--pipeline distilled)");
  sub->add_option("--transformer-path", m.transformer_path,
                  "Split layout: the transformer (+ text connectors) file, safetensors or GGUF "
                  "(the community quantizations: Q8_0 ... Q2_K layers computed as stored)");
  sub->add_option("--text-connectors-path", m.text_connectors_path,
                  "Split layout: the text connectors (+ projection) from a file of their own, for "
                  "a transformer file without them (a community GGUF holds the transformer only)");
  sub->add_option("--text-encoder-path", m.text_encoder_path,
                  "Gemma text encoder: a single-file .safetensors (or a Gemma folder)");
  sub->add_option("--gemma-root", m.gemma_root, "Gemma text encoder folder (Hugging Face layout)");
  sub->add_option("--video-vae-path", m.video_vae_path,
                  "Video VAE file (split layout, or to override the checkpoint's)");
  sub->add_option("--audio-vae-path", m.audio_vae_path, "Split layout: audio VAE + vocoder file");
  sub->add_option("--spatial-upsampler-path", m.spatial_upsampler_path,
                  "x2 spatial latent upsampler (two-stage and distilled pipelines)");
  sub->add_option("--temporal-upsampler-path", m.temporal_upsampler_path,
                  "dfr: temporal x2 latent upsampler (needed for temporal rounds)");
  sub->add_option("--duration-head-path", m.duration_head_path,
                  "Split layout: the duration head file (LTX-2.5)");
  sub->add_option("--distilled-lora", c.distilled_lora,
                  "PATH [STRENGTH]: distilled LoRA of the second stage (two-stage pipelines; "
                  "strength default 1)")
      ->expected(1, 2);
  sub->add_option("--lora", c.loras, "PATH [STRENGTH]: a LoRA for every stage (repeatable)")
      ->expected(1, 2);
  sub->add_option("--detailing-lora", c.detailing_lora,
                  "dfr: PATH [STRENGTH] of the stage-2 x2 spatial detailing IC-LoRA")
      ->expected(1, 2);
  add_quantization_flag(sub, c.quantization);
}

void add_quantization_flag(CLI::App* sub, std::string& mode) {
  sub->add_option("--quantization", mode,
                  "How the transformer's Linear weights are held: " +
                      quantization::available_modes() +
                      ". none (default) keeps the file's weights; fp8-cast stores the attention "
                      "and feed-forward Linears of every block in FP8 (e4m3) and upcasts them at "
                      "each matmul, about half the transformer's weight memory. fp8-scaled-mm "
                      "reads a pre-quantised FP8 checkpoint (e4m3 weights with weight_scale and "
                      "input_scale) and multiplies in FP8 with those static scales. fp8 (ours) "
                      "quantises fp8-cast's Linears per tensor at load and the activations per "
                      "token at each matmul, FP8 GEMMs on any bf16 or FP8 file. nvfp4-cast "
                      "quantises the video branch's 12 Linears a block to NVFP4 (4-bit, about a "
                      "quarter), nvfp4-prequant loads a pre-quantised NVFP4 file (both "
                      "dequantised to bf16 for each matmul on this GPU generation). "
                      "fp8-blockwise stores every Linear of the blocks but the gate logits in "
                      "128x128 FP8 tiles with their own scales (quantised at load, or a blockwise "
                      "FP8 file as stored) and quantises the activations per token and 128 "
                      "inputs: FP8 GEMMs on Hopper GPUs. Example: --quantization fp8-cast")
      ->default_str("none");
}

generate::ModelFlags resolved_models(const ModelFlagsCli& c) {
  generate::ModelFlags m = c.models;
  for (const auto& l : c.loras) m.loras.push_back(parse_lora(l, "--lora"));
  if (!c.distilled_lora.empty()) m.distilled_lora = parse_lora(c.distilled_lora, "--distilled-lora");
  if (!c.detailing_lora.empty()) m.detailing_lora = parse_lora(c.detailing_lora, "--detailing-lora");
  const hub::Preset* preset = model_preset(c);
  const bool quantization_given = c.sub != nullptr && c.sub->count("--quantization") > 0;
  m.quantization = quantization::parse_mode(
      preset && !quantization_given && !preset->quantization.empty() ? std::string(preset->quantization)
                                                                      : c.quantization);
  return m;
}

const hub::Preset* model_preset(const ModelFlagsCli& c) {
  return c.model.empty() ? nullptr : &hub::preset(c.model, "--model");
}

void resolve_preset_files(const ModelFlagsCli& c, generate::ModelFlags& models,
                          const generate::ComponentNeeds* needs) {
  if (const hub::Preset* preset = model_preset(c)) apply_model_preset(*preset, models, needs, c.hub);
}

Device resolved_device(const ModelFlagsCli& c) { return parse_device(c.device, "--device"); }

const char* const kMaxGpuMemoryHelp =
    "GiB of GPU memory the run may use (e.g. 24 or 23.5; at most the device's): the allocator "
    "enforces it, the resident models keep within it, and a model that cannot fit is an error "
    "before anything loads (CUDA only; default: the whole device)";

int64_t resolved_gpu_budget(const ModelFlagsCli& c) {
  if (c.max_gpu_memory.empty()) return 0;
  const int64_t bytes = generate::parse_gib(c.max_gpu_memory, "--max-gpu-memory");
  LTX_CHECK(!resolved_device(c).is_cpu(),
            "--max-gpu-memory budgets GPU memory; it does not apply to --device cpu (drop it, or "
            "add --device cuda)");
  return bytes;
}

generate::Offload resolved_offload(const ModelFlagsCli& c) {
  // Unset: the planner decides under a GPU budget, else every weight stays on the device.
  if (c.offload.empty())
    return !c.max_gpu_memory.empty() && resolved_device(c).is_cuda() ? generate::Offload::Auto
                                                                      : generate::Offload::None;
  const generate::Offload offload = generate::parse_offload(c.offload);
  generate::block_streaming(offload, resolved_device(c));  // --offload cpu with --device cpu
  return offload;
}

}  // namespace ltx::cli
