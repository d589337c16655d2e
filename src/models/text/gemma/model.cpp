#include "models/text/gemma/model.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "io/gguf.h"
#include "io/llama_gguf.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/text/gemma/layer_parameters.h"
#include "quantization/fp8_cast.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/ggml_linear.h"
#include "ops/linalg.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "ops/shape.h"

namespace ltx::text {

namespace {

// Rounds a float32 scale to `dtype` the way HF casts its float32 buffers to the weight dtype.
float round_to_dtype(float v, DType dtype) {
  if (dtype == DType::F32 || dtype == DType::F64) return v;
  Tensor t = Tensor::full({1}, v, DType::F32).to(dtype).to(DType::F32);
  return t.data<float>()[0];
}

Tensor activation(const std::string& name, const Tensor& x) {
  if (name == "gelu_pytorch_tanh") return ops::gelu_tanh(x);
  if (name == "gelu") return ops::gelu(x);
  if (name == "silu") return ops::silu(x);
  return ops::relu(x);  // the config parser admits nothing else
}

// How the checkpoint names the language model (get_gemma_ops).
struct KeyLayout {
  io::KeyMap keys;
  std::string description;
};

KeyLayout key_layout_for(const GemmaTextConfig& c,
                         const std::vector<std::shared_ptr<const io::SafetensorsFile>>& files) {
  switch (c.family) {
    case GemmaFamily::Gemma3: {
      // google/gemma-3 as published (language_model.model.*), as newer transformers save it
      // (model.language_model.*: Diffusers' text_encoder/) or ComfyUI's flat text-encoder file
      // (model.{layers,embed_tokens,norm}.*). The first file that has one of them decides.
      for (const auto& f : files) {
        for (const std::string& n : f->names()) {
          if (n.starts_with("language_model.model.")) break;
          if (n.starts_with("model.language_model."))
            return {io::KeyMap::strip_prefix("model.language_model."),
                    "Gemma 3, transformers >= 4.52 (model.language_model.*)"};
          if (n.starts_with("model.layers.") || n.starts_with("model.embed_tokens.")) {
            io::KeyMap k("Gemma 3, ComfyUI flat");
            k.keep("model.layers.").keep("model.embed_tokens.").keep("model.norm.");
            k.replace_prefix("model.", "");
            return {k, "Gemma 3, ComfyUI flat (model.{layers,embed_tokens,norm}.*)"};
          }
        }
      }
      return {io::KeyMap::strip_prefix("language_model.model."),
              "google/gemma-3 (language_model.model.*)"};
    }
    case GemmaFamily::Gemma4:
      return {io::KeyMap::strip_prefix("model.language_model."),
              "Gemma 4 (model.language_model.*)"};
    case GemmaFamily::Gemma4Unified: {
      // _gemma4_unified_is_comfy_flat: the first file that decides wins.
      bool flat = false;
      for (const auto& f : files) {
        if (f->contains("model.layers.0.post_feedforward_layernorm.weight")) {
          flat = true;
          break;
        }
        const auto& names = f->names();
        if (std::any_of(names.begin(), names.end(), [](const std::string& n) {
              return n.rfind("model.language_model.", 0) == 0;
            }))
          break;
      }
      if (!flat)
        return {io::KeyMap::strip_prefix("model.language_model."),
                "Gemma 4 unified, HF (model.language_model.*)"};
      io::KeyMap k("Gemma 4 unified, Comfy-flat");
      k.keep("model.layers.").keep("model.embed_tokens.").keep("model.norm.");
      k.replace_prefix("model.", "");
      return {k, "Gemma 4 unified, Comfy-flat (model.{layers,embed_tokens,norm}.*)"};
    }
  }
  fail("unreachable");
}

}  // namespace

bool gemma_keeps_fp8_linears(DType compute) { return compute == DType::BF16; }

bool gemma_keeps_stored_weight(std::string_view name, DType stored, DType compute) {
  return gemma_keeps_fp8_linears(compute) && stored == DType::F8E4M3FN &&
         is_gemma_linear_weight(name);
}

bool is_gemma_linear_weight(std::string_view name) {
  if (!name.ends_with(".weight")) return false;
  name.remove_suffix(7);
  const size_t dot = name.rfind('.');
  const std::string_view module = dot == std::string_view::npos ? name : name.substr(dot + 1);
  for (std::string_view linear : {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                  "down_proj", "per_layer_input_gate", "per_layer_projection",
                                  "per_layer_model_projection"})
    if (module == linear) return true;
  return false;
}

Tensor GemmaRmsNorm::operator()(const Tensor& x) const { return ops::rms_norm(x, scale, eps); }

GemmaTextModel GemmaTextModel::load(const GemmaAssets& assets, const nn::LoadOptions& opt,
                                    const models::BlockStreaming& streaming) {
  LTX_CHECK(!assets.config.is_null(), "Gemma text model: ", assets.source,
            " has no config (config.json / gemma_config metadata)");
  LTX_CHECK(!assets.weight_paths.empty(), "Gemma text model: ", assets.source,
            " has no weight files (model*.safetensors)");
  return load(GemmaTextConfig::from_json(assets.config, assets.source), assets.weight_paths, opt,
              streaming);
}

GemmaTextModel GemmaTextModel::load(const GemmaTextConfig& config,
                                    const std::vector<std::string>& weight_paths,
                                    const nn::LoadOptions& opt,
                                    const models::BlockStreaming& streaming) {
  LTX_CHECK(!weight_paths.empty(), "Gemma text model (", config.source, "): no weight files");
  if (io::is_gguf_file(weight_paths.front())) {
    // llama.cpp's Gemma 3 GGUF: one file, its names mapped back, its norms stored as 1 + w.
    LTX_CHECK(weight_paths.size() == 1, "Gemma text model: ", weight_paths.front(),
              " is a GGUF file; a GGUF text encoder is one file, not one of ", weight_paths.size());
    const auto file = io::GgufFile::open(weight_paths.front());
    io::require_llama_cpp_gemma3(*file);
    LTX_CHECK(config.family == GemmaFamily::Gemma3, "Gemma text model: ", file->path(),
              " is a Gemma 3 GGUF but the config (", config.source, ") is ", config.model_type);
    io::WeightMap w({file}, io::llama_cpp_gemma3_key_map());
    GemmaTextConfig c = config;
    c.norm_stored_plus_one = true;
    return load(c, w, opt, "llama.cpp Gemma 3 GGUF (blk.*, norms stored as 1 + w)", file->path(),
                streaming);
  }
  std::vector<std::shared_ptr<const io::SafetensorsFile>> files;
  for (const auto& p : weight_paths) files.push_back(io::SafetensorsFile::open(p));
  const KeyLayout layout = key_layout_for(config, files);
  io::WeightMap w(files, layout.keys);
  std::string where = weight_paths.front();
  if (weight_paths.size() > 1) where += str(" (+", weight_paths.size() - 1, " more)");
  LTX_CHECK(w.size() > 0, "Gemma text model: no language-model tensors of the ", layout.description,
            " layout in ", where, " (model_type ", config.model_type,
            "); is this the right text-encoder file?");
  // Pre-quantised FP8 weights (a ComfyUI FP8 text encoder, read under the official scale names by
  // io/layouts.h): the Linears' stay in e4m3 with their scales where the model computes in bf16
  // (the inner load); every other scale is folded once here, bf16(f32(w) * scale), as the
  // reference folds them. Unscaled FP8 weights are upcast exactly by take().
  const std::vector<std::string> names = w.names();
  if (std::any_of(names.begin(), names.end(),
                  [](const std::string& n) { return n.ends_with(".weight_scale"); })) {
    quantization::fold_prequant_scales(w, where, [&](const std::string& param) {
      return gemma_keeps_stored_weight(param, w.dtype(param), opt.dtype);
    });
  }
  return load(config, w, opt, layout.description, where, streaming);
}

GemmaTextModel GemmaTextModel::load(const GemmaTextConfig& config, io::WeightMap& w,
                                    const nn::LoadOptions& options, const std::string& key_layout,
                                    const std::string& where,
                                    const models::BlockStreaming& streaming) {
  nn::LoadOptions opt = options;
  opt.keep_fp8_linears = gemma_keeps_fp8_linears(options.dtype);
  LTX_CHECK(!streaming.enabled() || opt.device.is_cuda(),
            "--offload: the Gemma text encoder's layers stream to a GPU, but it is loaded on ",
            opt.device.str(), "; use --offload none on the CPU");
  GemmaTextModel m;
  m.config_ = config;
  m.key_layout_ = key_layout;
  const GemmaTextConfig& c = m.config_;
  const int64_t D = c.hidden_size;
  const DType f = opt.dtype;

  // Resident layers first (bound on the device), then the streamed ones (bound on the host in the
  // compute dtype, then packed for streaming).
  LTX_CHECK(streaming.resident >= 0, "Gemma text model: the resident layer count must be >= 0, "
            "got ", streaming.resident);
  nn::LoadOptions host_opt = opt;
  host_opt.device = Device::cpu();
  auto norm = [&](io::WeightMap& s, const std::string& name, int64_t dim,
                  const nn::LoadOptions& o) {
    GemmaRmsNorm n;
    n.eps = c.rms_norm_eps;
    n.scale = s.take(name, {dim}, f, o.device);
    // On the compute device, as for a resident model, also for a streamed layer's host copy.
    if (n.scale.defined() && c.norm_adds_one && !c.norm_stored_plus_one)
      n.scale = ops::add(n.scale.to(opt.device), 1.0).to(o.device);
    return n;
  };
  auto linear = [&](io::WeightMap& s, const std::string& name, int64_t in, int64_t out, bool bias,
                    const nn::LoadOptions& o) { return nn::Linear::load(s, name, in, out, bias, o); };

  if (w.contains("embed_tokens.weight") && w.is_quantized("embed_tokens.weight")) {
    // GGML blocks: kept as stored (a lookup dequantises its rows); rows that are not whole
    // blocks come back dense from Linear::load.
    nn::Linear table = nn::Linear::load(w, "embed_tokens", D, c.vocab_size, false, opt);
    if (table.format == nn::LinearFormat::GgmlBlocks)
      m.embed_blocks_ = std::move(table);
    else
      m.embed_tokens = table.weight;
    m.embed_scale = static_cast<float>(std::sqrt(static_cast<double>(D)));
  } else {
    const DType embed_dtype =
        w.contains("embed_tokens.weight") ? w.dtype("embed_tokens.weight") : f;
    m.embed_tokens = w.take("embed_tokens.weight", {c.vocab_size, D}, f, opt.device);
    m.embed_scale =
        round_to_dtype(static_cast<float>(std::sqrt(static_cast<double>(D))), embed_dtype);
  }
  m.norm_ = norm(w, "norm.weight", D, opt);

  const int64_t P = c.hidden_size_per_layer_input;
  if (P > 0) {
    const int64_t LP = c.num_layers * P;
    const DType ple_dtype =
        w.contains("embed_tokens_per_layer.weight") ? w.dtype("embed_tokens_per_layer.weight") : f;
    m.embed_tokens_per_layer =
        w.take("embed_tokens_per_layer.weight", {c.vocab_size_per_layer_input, LP}, f, opt.device);
    m.per_layer_embed_scale =
        round_to_dtype(static_cast<float>(std::sqrt(static_cast<double>(P))), ple_dtype);
    m.per_layer_model_projection = linear(w, "per_layer_model_projection", D, LP, false, opt);
    m.per_layer_projection_norm = norm(w, "per_layer_projection_norm.weight", P, opt);
  }

  if (c.num_layers > 0 && streaming.streams(c.num_layers - 1))
    m.streamed_ =
        std::make_shared<models::StreamedBlocks<GemmaDecoderLayer>>(opt.device, for_each_layer_tensor,
                                                                    streaming.from_file);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const GemmaLayerSpec& spec = c.layers[static_cast<size_t>(i)];
    io::WeightMap s = w.scoped(str("layers.", i, "."));
    const bool streamed = streaming.streams(i);
    const nn::LoadOptions& layer_opt = streamed ? host_opt : opt;
    GemmaDecoderLayer L;
    L.spec = spec;
    const int64_t H = c.num_heads, Dh = spec.head_dim, Hkv = spec.num_kv_heads;
    L.input_layernorm = norm(s, "input_layernorm.weight", D, layer_opt);
    L.post_attention_layernorm = norm(s, "post_attention_layernorm.weight", D, layer_opt);
    L.pre_feedforward_layernorm = norm(s, "pre_feedforward_layernorm.weight", D, layer_opt);
    L.post_feedforward_layernorm = norm(s, "post_feedforward_layernorm.weight", D, layer_opt);
    L.self_attn.q_proj = linear(s, "self_attn.q_proj", D, H * Dh, c.attention_bias, layer_opt);
    L.self_attn.o_proj = linear(s, "self_attn.o_proj", H * Dh, D, c.attention_bias, layer_opt);
    L.self_attn.q_norm = norm(s, "self_attn.q_norm.weight", Dh, layer_opt);
    if (spec.kv_source < 0) {
      L.self_attn.k_proj = linear(s, "self_attn.k_proj", D, Hkv * Dh, c.attention_bias, layer_opt);
      if (!spec.k_eq_v)
        L.self_attn.v_proj = linear(s, "self_attn.v_proj", D, Hkv * Dh, c.attention_bias, layer_opt);
      L.self_attn.k_norm = norm(s, "self_attn.k_norm.weight", Dh, layer_opt);
    } else {
      // HF drops these tensors of KV-shared layers on load.
      for (const char* n :
           {"self_attn.k_proj.", "self_attn.v_proj.", "self_attn.k_norm.", "self_attn.v_norm."})
        s.ignore(n);
    }
    if (c.v_norm) L.self_attn.v_norm.eps = c.rms_norm_eps;
    L.mlp.gate_proj = linear(s, "mlp.gate_proj", D, spec.intermediate_size, false, layer_opt);
    L.mlp.up_proj = linear(s, "mlp.up_proj", D, spec.intermediate_size, false, layer_opt);
    L.mlp.down_proj = linear(s, "mlp.down_proj", spec.intermediate_size, D, false, layer_opt);
    if (c.layer_scalar) L.layer_scalar = s.take("layer_scalar", {1}, f, layer_opt.device);
    if (P > 0) {
      L.per_layer_input_gate = linear(s, "per_layer_input_gate", D, P, false, layer_opt);
      L.per_layer_projection = linear(s, "per_layer_projection", P, D, false, layer_opt);
      L.post_per_layer_input_norm = norm(s, "post_per_layer_input_norm.weight", D, layer_opt);
    }
    if (streamed)
      m.streamed_->add(std::move(L));
    else
      m.layers_.push_back(std::move(L));
  }
  w.finish(str("Gemma text model (", c.model_type, ", ", key_layout, ") from ", where));
  if (m.streamed_) m.streamed_->start(streaming.slots);
  return m;
}

Device GemmaTextModel::device() const {
  return embed_blocks_.weight.defined() ? embed_blocks_.weight.device() : embed_tokens.device();
}

Tensor GemmaTextModel::embed(const Tensor& ids) const {
  if (!embed_blocks_.weight.defined()) return ops::embedding(embed_tokens, ids);
  // Only the looked-up rows of blocks are dequantised.
  const Tensor rows = ops::embedding(embed_blocks_.weight, ids.reshape({-1}));
  const ops::GgmlWeight picked{rows, embed_blocks_.ggml_type, config_.hidden_size};
  return ops::dequantize_ggml(picked, embed_blocks_.compute)
      .view({ids.size(0), ids.size(1), config_.hidden_size});
}

const GemmaLayerSpec& GemmaTextModel::spec(int64_t i) const {
  const int64_t resident = static_cast<int64_t>(layers_.size());
  return (i >= resident ? streamed_->host_block(i - resident) : layers_[static_cast<size_t>(i)])
      .spec;
}

std::vector<float> GemmaTextModel::rope_inv_freq(GemmaLayerType type) const {
  if (!config_.has_layer_type(type)) return {};
  return gemma_rope_inv_freq(config_.rope(type), config_.rope_head_dim(type));
}

std::vector<Tensor> GemmaTextModel::encode(const Tensor& input_ids, const Tensor& attention_mask,
                                           GemmaTrace* trace) const {
  LTX_CHECK(input_ids.dim() == 2, "Gemma encode: input_ids must be [batch, length], got ",
            input_ids.describe());
  LTX_CHECK(attention_mask.shape() == input_ids.shape(), "Gemma encode: attention_mask ",
            attention_mask.describe(), " does not match input_ids ", input_ids.describe());
  const int64_t B = input_ids.size(0), T = input_ids.size(1);
  std::vector<int64_t> pos(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) pos[static_cast<size_t>(b * T + t)] = t;
  const std::vector<int64_t> mask = attention_mask.to_int_vector();
  std::vector<uint8_t> valid(mask.size());
  for (size_t i = 0; i < mask.size(); ++i) valid[i] = mask[i] != 0;
  std::vector<Tensor> hidden;
  run(input_ids, Tensor::from_vector(pos, {B, T}), valid, 0, T, nullptr, &hidden, trace);
  return hidden;
}

GemmaKvCache GemmaTextModel::make_cache(int64_t batch, int64_t capacity) const {
  LTX_CHECK(batch > 0 && capacity > 0, "Gemma KV cache: batch and capacity must be positive");
  GemmaKvCache cache;
  cache.batch = batch;
  cache.capacity = capacity;
  cache.key_valid.assign(static_cast<size_t>(batch * capacity), 0);
  const Device dev = device();
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    const GemmaLayerSpec& spec_i = spec(i);
    if (spec_i.kv_source >= 0) {
      cache.keys.emplace_back();
      cache.values.emplace_back();
      continue;
    }
    const Shape s{batch, spec_i.num_kv_heads, capacity, spec_i.head_dim};
    cache.keys.push_back(Tensor::zeros(s, DType::F32, dev));
    cache.values.push_back(Tensor::zeros(s, DType::F32, dev));
  }
  return cache;
}

Tensor GemmaTextModel::forward(const Tensor& input_ids, const Tensor& position_ids,
                               const Tensor& attention_mask, GemmaKvCache& cache,
                               std::vector<Tensor>* hidden_states, GemmaTrace* trace,
                               const GemmaPrefillImages* images) const {
  LTX_CHECK(input_ids.dim() == 2 && position_ids.shape() == input_ids.shape() &&
                attention_mask.shape() == input_ids.shape(),
            "Gemma forward: input_ids, position_ids and attention_mask must share one [batch, "
            "length] shape, got ",
            input_ids.describe(), ", ", position_ids.describe(), ", ", attention_mask.describe());
  const int64_t B = input_ids.size(0), T = input_ids.size(1);
  LTX_CHECK(B == cache.batch, "Gemma forward: batch ", B, " does not match the cache's ",
            cache.batch);
  LTX_CHECK(cache.length + T <= cache.capacity, "Gemma forward: ", T, " new tokens after ",
            cache.length, " cached exceed the cache capacity ", cache.capacity);
  const int64_t past = cache.length, key_len = past + T;
  const std::vector<int64_t> mask = attention_mask.to_int_vector();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      cache.key_valid[static_cast<size_t>(b * cache.capacity + past + t)] =
          mask[static_cast<size_t>(b * T + t)] != 0;
  std::vector<uint8_t> valid(static_cast<size_t>(B * key_len));
  for (int64_t b = 0; b < B; ++b)
    std::copy_n(cache.key_valid.begin() + b * cache.capacity, key_len, valid.begin() + b * key_len);
  Tensor out =
      run(input_ids, position_ids, valid, past, key_len, &cache, hidden_states, trace, images);
  cache.length = key_len;
  return out;
}

Tensor GemmaTextModel::logits(const Tensor& hidden) const {
  Tensor l = embed_blocks_.weight.defined() ? embed_blocks_(hidden)
                                            : ops::linear(hidden, embed_tokens);
  if (config_.final_logit_softcapping) {
    const double cap = *config_.final_logit_softcapping;
    l = ops::mul(ops::tanh(ops::div(l, cap)), cap);
  }
  return l;
}

Tensor GemmaTextModel::run(const Tensor& input_ids, const Tensor& position_ids,
                           const std::vector<uint8_t>& key_valid, int64_t past, int64_t key_len,
                           GemmaKvCache* cache, std::vector<Tensor>* hidden_states,
                           GemmaTrace* trace, const GemmaPrefillImages* images) const {
  const GemmaTextConfig& c = config_;
  const int64_t B = input_ids.size(0), T = input_ids.size(1), D = c.hidden_size;
  const int64_t L = c.num_layers;

  // Token ids as the multimodal wrapper hands them to the language model.
  std::vector<int64_t> ids = input_ids.to_int_vector();
  for (auto& id : ids) {
    for (const int64_t r : c.replaced_token_ids)
      if (id == r) id = c.replacement_token_id;
    LTX_CHECK(id >= 0 && id < c.vocab_size, "Gemma: token id ", id, " is outside the vocabulary (",
              c.vocab_size, " entries)");
  }
  // Tables built on the host go to the weights' device (CUDA: every op runs there).
  const Device dev = device();
  const Tensor ids_t = Tensor::from_vector(ids, {B, T}).to(dev);
  Tensor h = ops::mul(embed(ids_t), static_cast<double>(embed_scale));

  // Image blocks: contiguous runs of image soft tokens (group id per new token, -1 elsewhere).
  std::vector<int64_t> image_group;
  if (images) {
    LTX_CHECK(B == 1 && past == 0, "Gemma: image features enter a prefill of one sequence "
              "(batch 1, empty cache); got batch ", B, " after ", past, " cached tokens");
    LTX_CHECK(static_cast<int64_t>(images->is_image.size()) == T, "Gemma: ",
              images->is_image.size(), " image-token flags for ", T, " tokens");
    image_group.assign(static_cast<size_t>(T), -1);
    int64_t groups = 0, used = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (!images->is_image[static_cast<size_t>(t)]) continue;
      if (t == 0 || !images->is_image[static_cast<size_t>(t - 1)]) ++groups;
      image_group[static_cast<size_t>(t)] = groups - 1;
      ++used;
    }
    LTX_CHECK(images->features.defined() && images->features.dim() == 2 &&
                  images->features.size(0) == used && images->features.size(1) == D,
              "Gemma: the prompt has ", used, " image tokens; the image features must be [", used,
              ", ", D, "], got ",
              images->features.defined() ? images->features.describe() : std::string("none"));
    // masked_scatter of the features over the image tokens' embeddings.
    const Tensor feats = images->features.to(dev, h.dtype());
    int64_t row = 0;
    for (int64_t t = 0; t < T;) {
      if (!images->is_image[static_cast<size_t>(t)]) {
        ++t;
        continue;
      }
      int64_t e = t;
      while (e < T && images->is_image[static_cast<size_t>(e)]) ++e;
      h.narrow(1, t, e - t).copy_from(feats.narrow(0, row, e - t).unsqueeze(0));
      row += e - t;
      t = e;
    }
  }

  // Dense Gemma 4 per-layer inputs: (norm(proj(embeds) / sqrt(D)) + embed_per_layer(ids)) /
  // sqrt(2).
  Tensor per_layer;
  const int64_t P = c.hidden_size_per_layer_input;
  if (P > 0) {
    for (const int64_t id : ids)
      LTX_CHECK(id < c.vocab_size_per_layer_input, "Gemma: token id ", id,
                " is outside the per-layer embedding table (", c.vocab_size_per_layer_input, ")");
    Tensor tok = ops::mul(ops::embedding(embed_tokens_per_layer, ids_t),
                          static_cast<double>(per_layer_embed_scale))
                     .view({B, T, L, P});
    const float proj_scale = static_cast<float>(std::pow(static_cast<double>(D), -0.5));
    Tensor proj =
        ops::mul(per_layer_model_projection(h), static_cast<double>(proj_scale)).view({B, T, L, P});
    proj = per_layer_projection_norm(proj);
    per_layer =
        ops::mul(ops::add(proj, tok), static_cast<double>(static_cast<float>(std::sqrt(0.5))));
  }

  if (hidden_states) hidden_states->push_back(h);

  // Rotary tables per layer type: cos/sin [B, T, 1, head_dim / 2] in float32.
  const std::vector<int64_t> pos = position_ids.to_int_vector();
  struct Rope {
    Tensor cos, sin;
  };
  Rope ropes[2];
  for (const auto type : {GemmaLayerType::Sliding, GemmaLayerType::Full}) {
    if (!c.has_layer_type(type)) continue;
    const std::vector<float> inv = rope_inv_freq(type);
    const auto half = static_cast<int64_t>(inv.size());
    Tensor cs = Tensor::empty({B, T, 1, half}), sn = Tensor::empty({B, T, 1, half});
    float* pc = cs.data<float>();
    float* ps = sn.data<float>();
    for (int64_t r = 0; r < B * T; ++r) {
      const float p = static_cast<float>(pos[static_cast<size_t>(r)]);
      for (int64_t i = 0; i < half; ++i) {
        const float a = inv[static_cast<size_t>(i)] * p;
        pc[r * half + i] = std::cos(a);
        ps[r * half + i] = std::sin(a);
      }
    }
    ropes[type == GemmaLayerType::Full ? 1 : 0] = {cs.to(dev), sn.to(dev)};
  }

  // Masks [B, 1, T, key_len]: key padding + causal (+ the sliding window), in sequence indices.
  Tensor masks[2];
  for (const auto type : {GemmaLayerType::Sliding, GemmaLayerType::Full}) {
    if (!c.has_layer_type(type)) continue;
    Tensor m = Tensor::empty({B, 1, T, key_len}, DType::U8);
    uint8_t* pm = m.data<uint8_t>();
    const bool sliding = type == GemmaLayerType::Sliding;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const int64_t q = past + t;
        uint8_t* row = pm + (b * T + t) * key_len;
        const uint8_t* kv = key_valid.data() + b * key_len;
        for (int64_t j = 0; j < key_len; ++j)
          row[j] = kv[j] && j <= q && (!sliding || j > q - c.sliding_window);
        // Bidirectional within an image block (an "or" on top of the causal / sliding rule;
        // padding still applies).
        const int64_t g = image_group.empty() ? -1 : image_group[static_cast<size_t>(t)];
        if (g >= 0)
          for (int64_t j = 0; j < key_len; ++j)
            if (kv[j] && image_group[static_cast<size_t>(j)] == g) row[j] = 1;
      }
    masks[sliding ? 0 : 1] = m.to(dev);
  }

  // Current full keys/values per layer (for KV-shared layers).
  std::vector<std::pair<Tensor, Tensor>> kv(static_cast<size_t>(L));
  const int64_t H = c.num_heads;

  // Streamed layers: each layer's copy is waited for before its compute, which releases its slot.
  models::StreamedPass<GemmaDecoderLayer> pass(streamed_.get());
  for (int64_t i = 0; i < L; ++i) {
    // The resident layers come first; streamed layer i is the ring's layer i - resident.
    const int64_t resident = static_cast<int64_t>(layers_.size());
    const bool streamed = i >= resident;
    const GemmaDecoderLayer& layer =
        streamed ? streamed_->acquire(i - resident) : layers_[static_cast<size_t>(i)];
    const GemmaLayerSpec& spec = layer.spec;
    const int ti = spec.type == GemmaLayerType::Full ? 1 : 0;
    const Rope& rope = ropes[ti];
    const int64_t Dh = spec.head_dim, Hkv = spec.num_kv_heads;
    const GemmaAttention& a = layer.self_attn;

    Tensor residual = h;
    const Tensor xn = layer.input_layernorm(h);

    Tensor q = a.q_norm(a.q_proj(xn).view({B, T, H, Dh}));
    q = ops::apply_rope(q, rope.cos, rope.sin, ops::RopeLayout::Split).permute({0, 2, 1, 3});
    Tensor k_all, v_all;
    if (spec.kv_source >= 0) {
      k_all = kv[static_cast<size_t>(spec.kv_source)].first;
      v_all = kv[static_cast<size_t>(spec.kv_source)].second;
    } else {
      const Tensor kr = a.k_proj(xn).view({B, T, Hkv, Dh});
      const Tensor vr = a.v_proj.weight.defined() ? a.v_proj(xn).view({B, T, Hkv, Dh}) : kr;
      Tensor k = ops::apply_rope(a.k_norm(kr), rope.cos, rope.sin, ops::RopeLayout::Split)
                     .permute({0, 2, 1, 3});
      Tensor v = (c.v_norm ? a.v_norm(vr) : vr).permute({0, 2, 1, 3});
      if (cache) {
        Tensor& ck = cache->keys[static_cast<size_t>(i)];
        Tensor& cv = cache->values[static_cast<size_t>(i)];
        ck.narrow(2, past, T).copy_from(k);
        cv.narrow(2, past, T).copy_from(v);
        k_all = ck.narrow(2, 0, key_len);
        v_all = cv.narrow(2, 0, key_len);
      } else {
        k_all = k;
        v_all = v;
      }
      kv[static_cast<size_t>(i)] = {k_all, v_all};
    }
    Tensor ke = k_all, ve = v_all;
    if (Hkv != H) {
      const int64_t rep = H / Hkv;
      ke = k_all.unsqueeze(2).expand({B, Hkv, rep, key_len, Dh}).reshape({B, H, key_len, Dh});
      ve = v_all.unsqueeze(2).expand({B, Hkv, rep, key_len, Dh}).reshape({B, H, key_len, Dh});
    }
    Tensor attn = ops::scaled_dot_product_attention(q, ke, ve, masks[ti], c.attention_scale);
    attn = a.o_proj(attn.permute({0, 2, 1, 3}).reshape({B, T, H * Dh}));
    if (trace && i == 0) trace->layer0_attn_out = attn;
    h = ops::add(residual, layer.post_attention_layernorm(attn));

    residual = h;
    const Tensor x2 = layer.pre_feedforward_layernorm(h);
    const Tensor act =
        ops::mul(activation(c.hidden_activation, layer.mlp.gate_proj(x2)), layer.mlp.up_proj(x2));
    h = ops::add(residual, layer.post_feedforward_layernorm(layer.mlp.down_proj(act)));

    if (P > 0) {
      residual = h;
      Tensor g = activation(c.hidden_activation, layer.per_layer_input_gate(h));
      g = ops::mul(g, per_layer.select(2, i));
      g = layer.post_per_layer_input_norm(layer.per_layer_projection(g));
      h = ops::add(residual, g);
    }
    if (layer.layer_scalar.defined()) h = ops::mul(h, layer.layer_scalar);
    if (streamed) streamed_->release(i - resident);
    if (hidden_states && i + 1 < L) hidden_states->push_back(h);
  }
  if (trace) trace->last_layer_raw = h;
  h = norm_(h);
  if (hidden_states) hidden_states->push_back(h);
  return h;
}

}  // namespace ltx::text
