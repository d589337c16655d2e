#pragma once
// The Gemma 3 / Gemma 4 text decoders as the reference runs them (HF transformers' Gemma3TextModel,
// Gemma4UnifiedTextModel and Gemma4TextModel behind LTXGemmaTextEncoder): the language model only
// (the vision / audio towers serve image prompts, which encoding does not use), with
//
//   * every hidden state out: [0] = embed_tokens(ids) * sqrt(hidden) (the scale held in float32 and
//     rounded to the embedding's stored dtype, as HF casts it to the weight dtype), [i] = output of
//     decoder layer i-1, [L] = the final RMSNorm of the last layer's output;
//   * sliding-window and global layers per the config, per-layer-type RoPE (rotate-half, cos/sin in
//     float32), GQA, per-head q/k RMSNorm before RoPE, Gemma 4's weightless v_norm, K-as-V global
//     layers and layer_scalar, dense Gemma 4's per-layer input embeddings and KV sharing;
//   * masks as HF builds them: key padding + causal, sliding layers also key > query - window (in
//     sequence indices); a query row with no visible key (a left pad) gets a zero attention output,
//     as SDPA gives;
//   * encode(): positions 0..T-1 including the left pads (LTXGemmaTextEncoder.encode);
//     the step API with a KV cache serves generation (positions = cumsum(mask) - 1 there).
//
// Weights come from a single-file text encoder (google/gemma-3 keys `language_model.model.*`, or
// Gemma 4 `model.language_model.*` / Comfy-flat `model.{layers,embed_tokens,norm}.*`) or the
// safetensors shards of a root folder (GemmaAssets::weight_paths), as get_gemma_ops maps them,
// or a llama.cpp Gemma 3 GGUF (io/llama_gguf.h: its blk.* names mapped back, its norms stored as
// 1 + w used as they are). A GGUF's block-quantized Linears run on their blocks
// (nn::LinearFormat::GgmlBlocks); a block-quantized token embedding stays in blocks too: a
// lookup dequantises the looked-up rows only, and lm_head multiplies by the blocks. Its scale
// sqrt(hidden) is then kept in f32, as llama.cpp runs it (HF rounds it to the weight dtype: 62
// instead of 61.97 for a bf16 12B, a 5e-4 difference below the quantisation's).
// lm_head is tied to embed_tokens (the files never store it).
// A file's FP8 Linear weights (ComfyUI's FP8 Gemma, with or without per-tensor scales) stay in
// e4m3 when the model computes in bf16 (nn::LoadOptions::keep_fp8_linears: 1 byte a weight, the
// same bits as folding them at load); in f32 they are widened at load.
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "models/block_streaming.h"
#include "models/text/gemma/config.h"
#include "models/text/gemma_assets.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ltx::text {

struct GemmaRmsNorm {
  Tensor scale;  // the effective multiplier ((1 + w) for Gemma 3, w for Gemma 4); undefined: none
  double eps = 1e-6;
  Tensor operator()(const Tensor& x) const;
};

struct GemmaAttention {
  nn::Linear q_proj, k_proj, v_proj, o_proj;  // k/v undefined on KV-shared layers, v on K-as-V
  GemmaRmsNorm q_norm, k_norm, v_norm;        // v_norm: Gemma 4 only (no scale)
};

struct GemmaMlp {
  nn::Linear gate_proj, up_proj, down_proj;
};

struct GemmaDecoderLayer {
  GemmaLayerSpec spec;
  GemmaRmsNorm input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
      post_feedforward_layernorm;
  GemmaAttention self_attn;
  GemmaMlp mlp;
  Tensor layer_scalar;  // [1], Gemma 4
  // Dense Gemma 4 per-layer input.
  nn::Linear per_layer_input_gate, per_layer_projection;
  GemmaRmsNorm post_per_layer_input_norm;
};

// Keys and values of every layer for autoregressive decoding: [B, Hkv, capacity, Dh] buffers
// filled up to `length`, plus the padding mask of the cached positions.
struct GemmaKvCache {
  int64_t batch = 0;
  int64_t capacity = 0;
  int64_t length = 0;
  std::vector<Tensor> keys, values;  // per layer; undefined for KV-shared layers
  std::vector<uint8_t> key_valid;    // [batch, capacity]: 1 where the cached token is not a pad
};

// The image soft tokens of a prefill (Gemma 3's image-aware generation, batch 1): their input
// embeddings are rows of `features` (the projected image, not scaled token embeddings), and
// within each contiguous block of image tokens every token attends to every other, as HF's
// token_type_ids mask does on the first forward (past = 0).
struct GemmaPrefillImages {
  std::vector<uint8_t> is_image;  // one entry per new token: 1 on image soft tokens
  Tensor features;                // [number of image tokens, hidden], in token order
};

// Intermediates for parity checks.
struct GemmaTrace {
  Tensor layer0_attn_out;  // layers[0].self_attn output (after o_proj), [B, T, D]
  Tensor last_layer_raw;   // the last decoder layer's output before the final norm, [B, T, D]
};

// True when `name` (under any of the key layouts' prefixes) is the weight of one of the language
// model's Linears (q/k/v/o_proj, gate/up/down_proj, the per-layer-input projections).
bool is_gemma_linear_weight(std::string_view name);
// Whether a load computing in `compute` keeps its Linears' FP8 file weights as stored (see above):
// in bf16, where upcasting at each forward gives the bits folding at load gives; not in f32, where
// f32(w) * scale unrounded would not be the reference's bf16 fold.
bool gemma_keeps_fp8_linears(DType compute);
// Whether the tensor `name`, stored as `stored`, is one such kept weight (the loader leaves its
// scale unfolded; the memory planner counts it at a byte).
bool gemma_keeps_stored_weight(std::string_view name, DType stored, DType compute);

class GemmaTextModel {
 public:
  // Reads the config from `assets` and binds the language model's weights from its weight files.
  // Missing, misshaped and unexpected language-model tensors are reported in one error.
  // With `streaming` enabled (opt.device a GPU) the decoder layers are bound on the host and
  // streamed through device slots (models/block_streaming.h); the rest is on opt.device.
  static GemmaTextModel load(const GemmaAssets& assets, const nn::LoadOptions& opt = {},
                             const models::BlockStreaming& streaming = {});
  // The same from an already parsed config and explicit weight files.
  static GemmaTextModel load(const GemmaTextConfig& config,
                             const std::vector<std::string>& weight_paths,
                             const nn::LoadOptions& opt = {},
                             const models::BlockStreaming& streaming = {});
  // The same from a weight map whose names are the language model's own ("embed_tokens.weight",
  // "layers.0. ..."), e.g. io::WeightMap::synthetic for benchmarks. `key_layout` is what
  // key_layout() reports; `where` names the source in errors.
  static GemmaTextModel load(const GemmaTextConfig& config, io::WeightMap& w,
                             const nn::LoadOptions& opt, const std::string& key_layout,
                             const std::string& where,
                             const models::BlockStreaming& streaming = {});

  // Whether the decoder layers stream from host memory.
  bool streams_layers() const { return streamed_ != nullptr; }

  const GemmaTextConfig& config() const { return config_; }
  const std::string& key_layout() const { return key_layout_; }  // how the keys were mapped

  // LTXGemmaTextEncoder.encode: input_ids, attention_mask [B, T] (integers; mask 1 on tokens,
  // 0 on pads). Returns the num_layers + 1 hidden states, each [B, T, hidden] f32.
  std::vector<Tensor> encode(const Tensor& input_ids, const Tensor& attention_mask,
                             GemmaTrace* trace = nullptr) const;

  // An empty cache for `batch` sequences of up to `capacity` tokens.
  GemmaKvCache make_cache(int64_t batch, int64_t capacity) const;
  // Runs the new tokens input_ids [B, T] at position_ids [B, T] with their padding mask [B, T]
  // after everything in `cache` (appending to it), and returns the final-normed last hidden
  // state [B, T, hidden]. With `hidden_states`, also every hidden state of the new tokens.
  // With `images` (an empty cache, batch 1), the image soft tokens take the image features and
  // attend within their block (GemmaPrefillImages).
  Tensor forward(const Tensor& input_ids, const Tensor& position_ids, const Tensor& attention_mask,
                 GemmaKvCache& cache, std::vector<Tensor>* hidden_states = nullptr,
                 GemmaTrace* trace = nullptr, const GemmaPrefillImages* images = nullptr) const;

  // lm_head (tied to embed_tokens) and final_logit_softcapping: hidden [..., D] -> [..., vocab].
  Tensor logits(const Tensor& hidden) const;

  // The rotary inverse frequencies of a layer type (undefined when no layer has that type).
  std::vector<float> rope_inv_freq(GemmaLayerType type) const;

 private:
  GemmaTextConfig config_;
  std::string key_layout_;
  Tensor embed_tokens;  // [vocab, D]; undefined when the table is in GGML blocks
  nn::Linear embed_blocks_;  // a GGUF's block-quantized table [vocab, D] (GgmlBlocks); else unset
  float embed_scale = 1.0f;
  std::vector<GemmaDecoderLayer> layers_;  // the resident layers: the first ones (all unstreamed)
  std::shared_ptr<models::StreamedBlocks<GemmaDecoderLayer>> streamed_;
  GemmaRmsNorm norm_;
  // Dense Gemma 4 per-layer input embeddings.
  Tensor embed_tokens_per_layer;  // [vocab_per_layer, L * P]
  float per_layer_embed_scale = 1.0f;
  nn::Linear per_layer_model_projection;  // [L * P, D]
  GemmaRmsNorm per_layer_projection_norm;

  // The device the model computes on (the embedding table's).
  Device device() const;
  // embed_tokens rows of ids [B, T] (on device()) -> [B, T, D], before the scale.
  Tensor embed(const Tensor& ids) const;
  // Layer i's shapes and kinds (its weights may be on the host when streamed).
  const GemmaLayerSpec& spec(int64_t i) const;
  // key_valid [B, key_len]: 1 on non-pad keys (cached ones first, then the new tokens).
  Tensor run(const Tensor& input_ids, const Tensor& position_ids,
             const std::vector<uint8_t>& key_valid, int64_t past, int64_t key_len,
             GemmaKvCache* cache, std::vector<Tensor>* hidden_states, GemmaTrace* trace,
             const GemmaPrefillImages* images = nullptr) const;
};

}  // namespace ltx::text
