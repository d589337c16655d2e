#include "generate/demo_bundle.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <utility>
#include <vector>

#include "core/cache_dir.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "generate/demo_assets.h"
#include "generate/model_set_writer.h"
#include "io/safetensors.h"

namespace ltx::generate {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kCheckpointName = "ltx-2.3-demo.safetensors";
constexpr const char* kTextEncoderName = "gemma-3-demo.safetensors";
constexpr const char* kUpsamplerName = "spatial-upscaler-x2-demo.safetensors";
constexpr const char* kTemporalUpsamplerName = "temporal-upscaler-x2-demo.safetensors";
constexpr const char* kLoraName = "distilled-lora-demo.safetensors";
constexpr const char* kIcLoraName = "ic-lora-demo.safetensors";
constexpr const char* kHdrLoraName = "hdr-ic-lora-demo.safetensors";
// Found next to the text encoder by --enhance-prompt (text::find_default_system_prompt).
constexpr const char* kSystemPromptName = "gemma3_t2v_system_prompt.txt";
constexpr const char* kSystemPrompt =
    "You turn a short idea into a prompt for a video and audio generator. Answer with one "
    "paragraph in the present tense: the scene, the subjects and their motion, the camera, the "
    "light, and what can be heard.\n";
constexpr const char* kModelVersion = "2.3.0";
constexpr int64_t kLoraRank = 2;

// ---------------------------------------------------------------------------- configs
// An LTX-2.3 transformer section (gated attention, cross-attention AdaLN, V2 text projection
// before the connectors) at toy sizes, latent widths included (16 video channels, 2 x 16 audio;
// the published files have 128 and 8 x 16): the pipelines read the widths from this config. The
// LTX-2.5 keyframe embedding is on too, so that generated keyframes and the dfr pipeline run.
constexpr const char* kTransformerConfig = R"({
  "_class_name": "AVTransformer3DModel", "activation_fn": "gelu-approximate",
  "attention_bias": true, "attention_type": "default", "cross_attention_norm": true,
  "double_self_attention": false, "dropout": 0.0, "norm_elementwise_affine": false,
  "norm_eps": 1e-06, "num_embeds_ada_norm": 1000, "num_vector_embeds": null,
  "only_cross_attention": false, "upcast_attention": false, "use_linear_projection": false,
  "qk_norm": "rms_norm", "standardization_norm": "rms_norm", "positional_embedding_type": "rope",
  "positional_embedding_theta": 10000.0, "positional_embedding_max_pos": [20, 2048, 2048],
  "timestep_scale_multiplier": 1000, "av_ca_timestep_scale_multiplier": 1000.0,
  "causal_temporal_positioning": true, "use_audio_video_cross_attention": true,
  "share_ff": false, "audio_positional_embedding_max_pos": [20], "av_cross_ada_norm": true,
  "use_middle_indices_grid": true, "rope_type": "split", "frequencies_precision": "float64",
  "num_layers": 2, "num_attention_heads": 2, "attention_head_dim": 16,
  "cross_attention_dim": 32, "audio_num_attention_heads": 2, "audio_attention_head_dim": 8,
  "audio_cross_attention_dim": 16, "in_channels": 16, "out_channels": 16,
  "audio_in_channels": 32, "audio_out_channels": 32, "caption_channels": 24,
  "apply_gated_attention": true, "cross_attention_adaln": true,
  "caption_proj_before_connector": true, "caption_projection_first_linear": false,
  "caption_projection_second_linear": false, "caption_proj_input_norm": false,
  "use_embeddings_connector": true, "connector_num_attention_heads": 2,
  "connector_attention_head_dim": 16, "audio_connector_num_attention_heads": 2,
  "audio_connector_attention_head_dim": 8, "connector_num_layers": 2,
  "connector_positional_embedding_max_pos": [4096], "connector_num_learnable_registers": 128,
  "connector_learnable_registers_std": 1, "connector_apply_gated_attention": true,
  "connector_norm_output": true, "text_encoder_norm_type": "per_token_rms",
  "use_keyframes_abs_pos_embedding": true
})";

// The LTX-2.3 conv VAE scale factors (x8 time, x32 space). The encoder's width is the latent
// width, so it keeps it (multipliers 1) through its four compressing blocks; the decoder has 4
// base channels.
constexpr const char* kVaeConfig = R"({
  "_class_name": "CausalVideoAutoencoder", "dims": 3, "in_channels": 3, "out_channels": 3,
  "latent_channels": 16,
  "encoder_blocks": [["compress_space_res", {"multiplier": 1}],
                     ["compress_time_res", {"multiplier": 1}],
                     ["compress_all_res", {"multiplier": 1}],
                     ["compress_all_res", {"multiplier": 1}]],
  "decoder_blocks": [["res_x", {"num_layers": 1}], ["compress_space", {"multiplier": 2}],
                     ["res_x", {"num_layers": 1}], ["compress_time", {"multiplier": 2}],
                     ["res_x", {"num_layers": 1}], ["compress_all", {"multiplier": 1}],
                     ["res_x", {"num_layers": 1}], ["compress_all", {"multiplier": 2}],
                     ["res_x", {"num_layers": 1}]],
  "scaling_factor": 1.0, "norm_layer": "pixel_norm", "patch_size": 4,
  "latent_log_var": "uniform", "use_quant_conv": false, "causal_decoder": false,
  "timestep_conditioning": false, "normalize_latent_channels": false,
  "encoder_base_channels": 4, "decoder_base_channels": 4, "spatial_padding_mode": "zeros"
})";

// Audio VAE: 2 latent channels x 16 latent mel bins (64 mel bins), 16 kHz, hop 160; `ch` must
// equal the latent width 2 x 16 (its statistics have `ch` entries).
constexpr const char* kAudioVaeConfig = R"({
  "model": {"params": {"ddconfig": {
      "double_z": true, "mel_bins": 64, "z_channels": 2, "resolution": 256,
      "downsample_time": false, "in_channels": 2, "out_ch": 2, "ch": 32, "ch_mult": [1, 1, 1],
      "num_res_blocks": 1, "attn_resolutions": [], "dropout": 0.0,
      "mid_block_add_attention": false, "norm_type": "pixel", "causality_axis": "height"},
    "sampling_rate": 16000}},
  "preprocessing": {
    "audio": {"sampling_rate": 16000, "max_wav_value": 32768.0, "duration": 5.12,
              "stereo": true, "causal_padding": 3},
    "stft": {"filter_length": 1024, "hop_length": 160, "win_length": 1024, "causal": true},
    "mel": {"n_mel_channels": 64, "mel_fmin": 0, "mel_fmax": 8000}}
})";

// BigVGAN-v2 at 16 kHz + bandwidth extension to 48 kHz (the 2.3 layout), narrow.
constexpr const char* kVocoderConfig = R"({
  "vocoder": {"upsample_initial_channel": 64, "resblock": "AMP1",
              "upsample_rates": [5, 2, 2, 2, 2, 2], "resblock_kernel_sizes": [3, 7, 11],
              "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4],
              "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "stereo": true,
              "use_tanh_at_final": false, "activation": "snakebeta", "use_bias_at_final": false},
  "bwe": {"upsample_initial_channel": 32, "resblock": "AMP1", "upsample_rates": [6, 5, 2, 2, 2],
          "resblock_kernel_sizes": [3, 7, 11], "upsample_kernel_sizes": [12, 11, 4, 4, 4],
          "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "stereo": true,
          "use_tanh_at_final": false, "activation": "snakebeta", "use_bias_at_final": false,
          "apply_final_activation": false, "input_sampling_rate": 16000,
          "output_sampling_rate": 48000, "hop_length": 80, "n_fft": 256, "win_size": 256,
          "num_mels": 64}
})";

constexpr const char* kUpsamplerConfig = R"({
  "_class_name": "LatentUpsampler", "in_channels": 16, "mid_channels": 32,
  "num_blocks_per_stage": 1, "dims": 3, "spatial_upsample": true, "temporal_upsample": false,
  "spatial_scale": 2.0, "rational_resampler": false
})";

constexpr const char* kTemporalUpsamplerConfig = R"({
  "_class_name": "LatentUpsampler", "in_channels": 16, "mid_channels": 32,
  "num_blocks_per_stage": 1, "dims": 3, "spatial_upsample": false, "temporal_upsample": true,
  "spatial_scale": 1.0, "rational_resampler": false
})";

// ---------------------------------------------------------------------------- values

// Values for the file tensor `key`: matrices and kernels uniform in +-1/sqrt(fan in) (activations
// keep their scale through the random layers), biases near 0, other vectors and scalars (norm
// weights, statistics, activation parameters) near 1. Seeded by the key: the same bytes always.
Tensor demo_values(const std::string& key, const Shape& shape, DType dtype) {
  double center = 0.0, scale = 0.0;
  if (shape.size() >= 2) {
    const int64_t fan_in = shape[0] > 0 ? shape.numel() / shape[0] : 1;
    scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)));
  } else if (key.ends_with("bias")) {
    scale = 0.02;
  } else {
    center = 1.0;
    scale = 0.1;
  }
  uint64_t state = fnv1a(key) ^ 0x4C54582D44454D4Full;  // "LTX-DEMO"
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  for (float& x : v) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
    x = static_cast<float>(center + scale * (2.0 * u - 1.0));
  }
  return Tensor::from_vector(v, shape).to(dtype);
}

// Rank-2 factors for the self-attention projections of every block (the layers the published
// distilled LoRA adapts, among others), in the trainer's ComfyUI layout. `seed_prefix` makes the
// values of different LoRAs differ; `metadata` goes into the file's header.
void write_lora(const std::string& path, const FileTensorShapes& transformer,
                const std::string& seed_prefix = "",
                const std::map<std::string, std::string>& metadata = {}) {
  const std::regex target(
      R"(model\.diffusion_model\.(transformer_blocks\.\d+\.attn1\.(to_q|to_k|to_v|to_out\.0))\.weight)");
  std::vector<std::pair<std::string, Tensor>> t;
  for (const auto& [key, shape] : transformer) {
    std::smatch m;
    if (!std::regex_match(key, m, target) || shape.size() != 2) continue;
    const std::string base = "diffusion_model." + m[1].str();
    t.emplace_back(base + ".lora_A.weight",
                   demo_values(seed_prefix + base + ".lora_A", {kLoraRank, shape[1]}, DType::BF16));
    t.emplace_back(base + ".lora_B.weight",
                   demo_values(seed_prefix + base + ".lora_B", {shape[0], kLoraRank}, DType::BF16));
  }
  LTX_CHECK(!t.empty(), "demo bundle: no LoRA targets in the transformer");
  io::write_safetensors(path, t, metadata);
}

DemoBundle bundle_in(const std::string& dir) {
  const fs::path d(dir);
  return {dir,
          (d / kCheckpointName).string(),
          (d / kTextEncoderName).string(),
          (d / kUpsamplerName).string(),
          (d / kTemporalUpsamplerName).string(),
          (d / kLoraName).string(),
          (d / kSystemPromptName).string(),
          (d / kIcLoraName).string(),
          (d / kHdrLoraName).string()};
}

bool complete(const DemoBundle& b) {
  std::error_code ec;
  for (const std::string* p : {&b.checkpoint, &b.text_encoder, &b.spatial_upsampler,
                               &b.temporal_upsampler, &b.distilled_lora, &b.system_prompt, &b.ic_lora, &b.hdr_lora})
    if (!fs::is_regular_file(*p, ec)) return false;
  return true;
}

}  // namespace

std::string default_demo_dir() {
  const std::optional<std::string> cache = user_cache_dir();
  LTX_CHECK(cache.has_value(),
            "the built-in demo needs a cache folder: set XDG_CACHE_HOME or HOME, or pass model "
            "files (--checkpoint-path ...)");
  return (fs::path(*cache) / kDemoBundleVersion).string();
}

void write_demo_bundle_files(const std::string& dir) {
  const DemoBundle b = bundle_in(dir);
  json config = json::object();
  config["transformer"] = json::parse(kTransformerConfig);
  config["vae"] = json::parse(kVaeConfig);
  config["audio_vae"] = json::parse(kAudioVaeConfig);
  config["vocoder"] = json::parse(kVocoderConfig);
  const std::string gemma_config(demo_gemma_config());
  const FileTensorShapes transformer =
      write_checkpoint_file(b.checkpoint, config, kModelVersion, gemma_config, demo_values);
  write_text_encoder_file(b.text_encoder, gemma_config, DType::F32, demo_values);
  write_upsampler_file(b.spatial_upsampler, json::parse(kUpsamplerConfig), demo_values);
  write_upsampler_file(b.temporal_upsampler, json::parse(kTemporalUpsamplerConfig), demo_values);
  write_lora(b.distilled_lora, transformer);
  // An IC-LoRA with the metadata ic-lora reads (a reference at the stage size: the demo's half
  // size, 96x160, is the smallest the x32 VAE takes).
  write_lora(b.ic_lora, transformer, "ic_lora.", {{"format", "pt"}, {"reference_downscale_factor", "1"}});
  // An HDR IC-LoRA: the metadata hdr-ic-lora reads (the LogC3 working space, references at the
  // generation size).
  write_lora(b.hdr_lora, transformer, "hdr_ic_lora.",
             {{"format", "pt"}, {"hdr_transform", "logc3"}, {"reference_downscale_factor", "1"}});
  std::ofstream(b.system_prompt) << kSystemPrompt;
  LTX_CHECK(fs::file_size(b.system_prompt) > 0, "cannot write ", b.system_prompt);
}

DemoBundle ensure_demo_bundle(const std::string& dir) {
  const DemoBundle b = bundle_in(dir);
  if (complete(b)) return b;
  log_info("writing the demo bundle (tiny random weights, once) to ", dir);
  const std::string tmp = str(dir, ".tmp-", getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  LTX_CHECK(!ec, "cannot create the demo bundle folder '", tmp, "': ", ec.message());
  try {
    write_demo_bundle_files(tmp);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  // An incomplete folder from an interrupted older run is replaced; a complete one that a
  // concurrent run just renamed into place wins.
  if (fs::exists(dir, ec) && !complete(b)) fs::remove_all(dir, ec);
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp);
    LTX_CHECK(complete(b), "cannot move the demo bundle into '", dir, "': ", ec.message());
  }
  return b;
}

}  // namespace ltx::generate
