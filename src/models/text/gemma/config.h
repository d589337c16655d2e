#pragma once
// The Gemma text-decoder configuration, read from the HF config JSON the reference reads
// (GemmaAssets::config: a root's config.json or a text-encoder file's `gemma_config` metadata),
// with HF transformers' defaults for absent keys and the derivations its config classes make:
//
//   gemma3          Gemma3Config / Gemma3TextConfig: layer types from `layer_types` or
//                   `sliding_window_pattern` (default 6: every 6th layer global); RoPE from
//                   `rope_parameters` or the legacy `rope_theta` (global, default 1e6) +
//                   `rope_scaling` (global) + `rope_local_base_freq` (sliding, default 1e4);
//                   attention scale query_pre_attn_scalar^-1/2; RMSNorm scales by (1 + w).
//   gemma4_unified  Gemma4UnifiedConfig (the LTX-2.5 text encoder) and
//   gemma4          Gemma4Config (dense instruct models, e.g. the prompt enhancer): explicit
//                   `layer_types` or the 5:1 pattern with the last layer forced global;
//                   per-layer-type `rope_parameters` (default: sliding "default" 1e4, full
//                   "proportional" 1e6 with partial_rotary_factor 0.25); global layers use
//                   `global_head_dim` (default 512) and, with `attention_k_eq_v`,
//                   `num_global_key_value_heads` KV heads and K as V; attention scale 1; RMSNorm
//                   scales by w; v_norm; per-layer `layer_scalar`; dense models may add per-layer
//                   input embeddings (`hidden_size_per_layer_input`), KV sharing
//                   (`num_kv_shared_layers`) and double-wide MLPs.
//
// Features the HF code has but these models do not use are refused with an error naming the key
// (bidirectional text attention, mixture-of-experts blocks, RoPE types other than default /
// linear / proportional): a config is never silently run differently from the reference.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ltx::text {

enum class GemmaFamily {
  Gemma3,         // model_type "gemma3"
  Gemma4Unified,  // model_type "gemma4_unified" (encode only)
  Gemma4,         // model_type "gemma4" (dense instruct; enhancement only in the reference)
};
const char* gemma_family_name(GemmaFamily family);

enum class GemmaLayerType { Sliding, Full };
const char* gemma_layer_type_name(GemmaLayerType type);  // "sliding_attention" / "full_attention"

// One layer type's rotary embedding (HF `rope_parameters[layer_type]`).
struct GemmaRope {
  std::string rope_type = "default";  // "default", "linear" or "proportional"
  double theta = 10000.0;
  double factor = 1.0;                 // linear / proportional: inv_freq / factor
  double partial_rotary_factor = 1.0;  // proportional: the rotated share of head_dim
};

struct GemmaLayerSpec {
  GemmaLayerType type = GemmaLayerType::Sliding;
  int64_t head_dim = 0;
  int64_t num_kv_heads = 0;
  bool k_eq_v = false;     // no v_proj: V is the raw k_proj output (Gemma 4 global layers)
  int64_t kv_source = -1;  // >= 0: a KV-shared layer reusing that layer's keys/values
  int64_t intermediate_size = 0;
};

struct GemmaTextConfig {
  std::string source;      // where the config came from (for messages)
  std::string model_type;  // the top-level model_type
  GemmaFamily family = GemmaFamily::Gemma3;
  std::optional<std::string> gemma_version;  // the top-level `gemma_version`, when present

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  double rms_norm_eps = 1e-6;
  int64_t sliding_window = 0;
  bool attention_bias = false;
  std::string hidden_activation = "gelu_pytorch_tanh";
  double attention_scale = 1.0;
  bool norm_adds_one = false;  // Gemma 3: RMSNorm scale (1 + w)
  // The weight files store that multiplier itself (llama.cpp's GGUF: 1 + w); set by the loader
  // of such files, never by from_json.
  bool norm_stored_plus_one = false;
  bool v_norm = false;         // Gemma 4: weightless RMSNorm on V
  bool layer_scalar = false;   // Gemma 4: every layer output times `layer_scalar`
  std::optional<double> final_logit_softcapping;
  // Dense Gemma 4 per-layer input embeddings (0: none).
  int64_t hidden_size_per_layer_input = 0;
  int64_t vocab_size_per_layer_input = 0;

  GemmaRope rope_sliding, rope_full;
  std::vector<GemmaLayerSpec> layers;

  int64_t pad_token_id = 0;
  // Generation stops at any of these (the model config's eos_token_id, as generate() reads it).
  std::vector<int64_t> eos_token_ids;
  // Ids the multimodal wrapper replaces before the embedding lookup, and by what: Gemma 3
  // replaces its image token with 0 only when it lies outside the vocabulary; Gemma 4 replaces
  // its image / video / audio tokens with pad_token_id.
  std::vector<int64_t> replaced_token_ids;
  int64_t replacement_token_id = 0;

  // Parses the HF config (the top-level object with model_type and text_config). `source` names
  // the file in error messages.
  static GemmaTextConfig from_json(const nlohmann::json& config, const std::string& source);

  const GemmaRope& rope(GemmaLayerType type) const {
    return type == GemmaLayerType::Full ? rope_full : rope_sliding;
  }
  // Head dim of the layer type's rotary table: the first layer of that type's head_dim.
  int64_t rope_head_dim(GemmaLayerType type) const;
  bool has_layer_type(GemmaLayerType type) const;
};

// The rotary inverse frequencies of one layer type as HF computes them (float32):
//   default:      1 / theta^(2i / d), i < d/2 (d = head_dim)
//   linear:       default / factor
//   proportional: the first floor(partial * d / 2) of 1 / theta^(2i / d), then zeros up to d/2,
//                 all / factor
std::vector<float> gemma_rope_inv_freq(const GemmaRope& rope, int64_t head_dim);

}  // namespace ltx::text
