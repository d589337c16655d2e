#pragma once
// Writes a Gemma 3 text encoder as llama.cpp's convert_hf_to_gguf.py + llama-quantize would (the
// layout io/llama_gguf.h reads): blk.* names, every RMSNorm stored as 1 + w (f32), the gemma3.*
// metadata, and the tokenizer.json's vocabulary as a SentencePiece one (tokenizer.ggml.*: tokens
// by id, types -- special added tokens control, other added tokens user-defined with their "▁"
// written as spaces, <0xXX> bytes, the rest normal -- and scores: minus the merge rank for a
// token some merge makes, below every merge for the other normal tokens, -1000 for added ones,
// as SentencePiece BPE models score their pieces). Tests only, through ltx's own GGUF writer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/ggml_type.h"
#include "io/gguf_writer.h"
#include "io/io_test_util.h"
#include "io/llama_gguf.h"
#include "io/safetensors.h"
#include "models/text/gemma_assets.h"
#include "op_types/ggml_blocks.h"
#include "quantization/ggml_quant.h"
#include "support/test_support.h"

namespace ltx::test {

struct LlamaGemmaGgufOptions {
  GgmlType linear = GgmlType::F32;     // 2-D projection weights whose rows are whole blocks
  GgmlType embedding = GgmlType::F32;  // token_embd, when its rows are whole blocks
  // Bad-input tests: edit the metadata, or drop a tensor (by its GGUF name) before writing.
  std::function<void(std::vector<io::GgufMetadata>&)> edit_metadata;
  std::function<bool(const std::string&)> keep_tensor;
};

inline io::GgufMetadata gguf_value(std::string key, io::GgufValueType type, nlohmann::json v) {
  return {std::move(key), type, io::GgufValueType::U8, std::move(v)};
}
inline io::GgufMetadata gguf_array(std::string key, io::GgufValueType element, nlohmann::json v) {
  return {std::move(key), io::GgufValueType::Array, element, std::move(v)};
}

// The llama.cpp name of a language-model name ("layers.0.self_attn.q_proj.weight" ->
// "blk.0.attn_q.weight"): the renames of io/llama_gguf.h undone, last first.
inline std::string llama_cpp_name_of(const std::string& model_name) {
  std::string out = model_name;
  const auto& renames = io::llama_cpp_gemma3_renames();
  for (auto it = renames.rbegin(); it != renames.rend(); ++it) {
    if (it->prefix) {
      if (out.starts_with(it->to)) out = it->from + out.substr(it->to.size());
    } else if (const size_t p = out.find(it->to); p != std::string::npos) {
      out = out.substr(0, p) + it->from + out.substr(p + it->to.size());
    }
  }
  return out;
}

// The SentencePiece view of a tokenizer.json (see the header comment).
struct SpmVocabOf {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
};
inline SpmVocabOf spm_vocab_of(const nlohmann::json& tok) {
  std::map<int64_t, std::string> by_id;
  for (auto it = tok["model"]["vocab"].begin(); it != tok["model"]["vocab"].end(); ++it)
    by_id[it.value().get<int64_t>()] = it.key();
  std::map<int64_t, bool> added;  // id -> special
  for (const auto& a : tok["added_tokens"]) {
    by_id[a["id"].get<int64_t>()] = a["content"].get<std::string>();
    added[a["id"].get<int64_t>()] = a["special"].get<bool>();
  }
  std::map<std::string, int64_t> rank;
  int64_t r = 0;
  for (const auto& m : tok["model"]["merges"]) {
    const std::string merged =
        m.is_array() ? m[0].get<std::string>() + m[1].get<std::string>() : [&] {
          std::string s = m.get<std::string>();
          s.erase(s.find(' '), 1);
          return s;
        }();
    rank.emplace(merged, r++);
  }
  const int64_t merges = r;
  SpmVocabOf v;
  const int64_t n = by_id.rbegin()->first + 1;
  for (int64_t id = 0; id < n; ++id) {
    const std::string s = by_id.count(id) ? by_id[id] : "[PAD" + std::to_string(id) + "]";
    const bool byte = s.size() == 6 && s.starts_with("<0x") && s.back() == '>';
    if (added.count(id)) {
      const bool special = added[id];
      std::string stored = s;
      if (!special)  // llama.cpp's converter writes a user-defined token's "▁" as a space
        for (size_t p; (p = stored.find("\xE2\x96\x81")) != std::string::npos;)
          stored.replace(p, 3, " ");
      v.tokens.push_back(stored);
      v.scores.push_back(-1000.0f);
      v.types.push_back(special ? 3 : 4);
    } else if (byte) {
      v.tokens.push_back(s);
      v.scores.push_back(0.0f);
      v.types.push_back(6);
    } else {
      v.tokens.push_back(s);
      v.scores.push_back(rank.count(s) ? -static_cast<float>(rank[s])
                                       : -static_cast<float>(merges + 1 + id));
      v.types.push_back(by_id.count(id) ? 1 : 5);
    }
  }
  return v;
}

// Writes `out` from the HF config, tokenizer.json (+ chat template) and the language model's
// tensors under its own names ("embed_tokens.weight", "layers.0. ...").
inline void write_llama_gemma3_gguf(const nlohmann::json& config, const nlohmann::json& tokenizer,
                                    const std::string& chat_template,
                                    const std::vector<std::pair<std::string, Tensor>>& lm,
                                    const std::string& out, const LlamaGemmaGgufOptions& opt = {}) {
  using io::GgufValueType;
  const nlohmann::json& tc = config["text_config"];
  const int64_t hidden = tc["hidden_size"], heads = tc["num_attention_heads"];
  const int64_t head_dim = tc.value("head_dim", hidden / heads);
  std::vector<io::GgufMetadata> meta = {
      io::gguf_string("general.architecture", "gemma3"),
      io::gguf_string("general.name", "tiny gemma 3"),
      io::gguf_u32("gemma3.context_length",
                   static_cast<uint32_t>(tc.value("max_position_embeddings", int64_t{131072}))),
      io::gguf_u32("gemma3.embedding_length", static_cast<uint32_t>(hidden)),
      io::gguf_u32("gemma3.block_count", tc["num_hidden_layers"].get<uint32_t>()),
      io::gguf_u32("gemma3.feed_forward_length", tc["intermediate_size"].get<uint32_t>()),
      io::gguf_u32("gemma3.attention.head_count", static_cast<uint32_t>(heads)),
      gguf_value("gemma3.attention.layer_norm_rms_epsilon", GgufValueType::F32,
                 tc.value("rms_norm_eps", 1e-6)),
      io::gguf_u32("gemma3.attention.key_length", static_cast<uint32_t>(head_dim)),
      io::gguf_u32("gemma3.attention.value_length", static_cast<uint32_t>(head_dim)),
      gguf_value("gemma3.rope.freq_base", GgufValueType::F32, tc.value("rope_theta", 1e6)),
      io::gguf_u32("gemma3.attention.sliding_window", tc["sliding_window"].get<uint32_t>()),
      io::gguf_u32("gemma3.attention.head_count_kv", tc["num_key_value_heads"].get<uint32_t>()),
  };
  if (tc.contains("rope_scaling")) {
    meta.push_back(io::gguf_string("gemma3.rope.scaling.type", "linear"));
    meta.push_back(
        gguf_value("gemma3.rope.scaling.factor", GgufValueType::F32, tc["rope_scaling"]["factor"]));
  }
  // query_pre_attn_scalar other than the head dim (the tiny model's): the attention scale key.
  const double qpas = tc.value("query_pre_attn_scalar", 256.0);
  if (qpas != static_cast<double>(head_dim))
    meta.push_back(gguf_value("gemma3.attention.scale", GgufValueType::F32, 1.0 / std::sqrt(qpas)));
  const SpmVocabOf v = spm_vocab_of(tokenizer);
  auto id_of = [&](const std::string& t) {
    return static_cast<uint32_t>(std::find(v.tokens.begin(), v.tokens.end(), t) - v.tokens.begin());
  };
  meta.push_back(io::gguf_string("tokenizer.ggml.model", "llama"));
  meta.push_back(io::gguf_string("tokenizer.ggml.pre", "default"));
  meta.push_back(gguf_array("tokenizer.ggml.tokens", GgufValueType::String, v.tokens));
  meta.push_back(gguf_array("tokenizer.ggml.scores", GgufValueType::F32, v.scores));
  meta.push_back(gguf_array("tokenizer.ggml.token_type", GgufValueType::I32, v.types));
  meta.push_back(io::gguf_u32("tokenizer.ggml.bos_token_id", id_of("<bos>")));
  meta.push_back(io::gguf_u32("tokenizer.ggml.eos_token_id", id_of("<eos>")));
  meta.push_back(io::gguf_u32("tokenizer.ggml.unknown_token_id", id_of("<unk>")));
  meta.push_back(io::gguf_u32("tokenizer.ggml.padding_token_id", id_of("<pad>")));
  meta.push_back(gguf_value("tokenizer.ggml.add_bos_token", GgufValueType::Bool, true));
  meta.push_back(gguf_value("tokenizer.ggml.add_eos_token", GgufValueType::Bool, false));
  meta.push_back(gguf_value("tokenizer.ggml.add_space_prefix", GgufValueType::Bool, false));
  if (!chat_template.empty())
    meta.push_back(io::gguf_string("tokenizer.chat_template", chat_template));
  if (opt.edit_metadata) opt.edit_metadata(meta);

  // Tensors: norms 1 + w in f32, projections and the table in the asked type where rows allow.
  std::vector<io::GgufTensorSpec> specs;
  std::vector<std::vector<float>> values;
  for (const auto& [name, t] : lm) {
    const std::string g = llama_cpp_name_of(name);
    if (opt.keep_tensor && !opt.keep_tensor(g)) continue;
    std::vector<float> x = t.to(DType::F32).contiguous().to_float_vector();
    GgmlType type = GgmlType::F32;
    if (io::llama_cpp_norm_stored_plus_one(name)) {
      for (float& e : x) e = e + 1.0f;
    } else if (t.dim() == 2) {
      const GgmlType want = name == "embed_tokens.weight" ? opt.embedding : opt.linear;
      if (t.size(1) % ops::ggml::block_elems(want) == 0) type = want;
    }
    specs.push_back({g, type, t.shape()});
    values.push_back(std::move(x));
  }
  io::write_gguf(out, meta, specs, [&](size_t i, std::span<uint8_t> bytes) {
    const Shape& s = specs[i].shape;
    const int64_t cols = s[s.size() - 1], rows = s.numel() / cols;
    quantization::quantize_rows(specs[i].type, values[i].data(), rows, cols, bytes.data());
  });
}

// A Gemma 3 text encoder on disk (root folder or single .safetensors file) written as above.
inline void write_llama_gemma3_gguf(const std::string& gemma_path, const std::string& out,
                                    const LlamaGemmaGgufOptions& opt = {}) {
  const text::GemmaAssets a = text::GemmaAssets::load(gemma_path);
  std::vector<std::pair<std::string, Tensor>> lm;
  const std::string prefix = "language_model.model.";
  for (const std::string& p : a.weight_paths) {
    const io::SafetensorsFile f(p);
    for (const std::string& n : f.names())
      if (n.starts_with(prefix)) lm.emplace_back(n.substr(prefix.size()), f.tensor(n).clone());
  }
  const std::string chat =
      a.has_sidecar("chat_template.jinja") ? a.sidecar("chat_template.jinja") : std::string();
  write_llama_gemma3_gguf(a.config, nlohmann::json::parse(a.tokenizer_json), chat, lm, out, opt);
}

// A 256-wide Gemma 3 (rows of whole K-quant blocks: 2 layers, 2 heads of 128, 1 KV head) with
// seeded random weights and the golden tiny vocabulary, written with `linear` projections and an
// `embedding` table.
inline void write_wide_gemma3_gguf(const std::string& out, GgmlType linear, GgmlType embedding) {
  const nlohmann::json tokenizer =
      nlohmann::json::parse(read_bytes(fixture("text_tokenizer_gemma3.json")));
  const int64_t V = 1088, D = 256, F = 256, H = 2, Hkv = 1, Dh = 128, L = 2;
  const nlohmann::json config = {{"model_type", "gemma3"},
                                 {"text_config",
                                  {{"hidden_size", D},
                                   {"intermediate_size", F},
                                   {"num_hidden_layers", L},
                                   {"num_attention_heads", H},
                                   {"num_key_value_heads", Hkv},
                                   {"head_dim", Dh},
                                   {"query_pre_attn_scalar", Dh},
                                   {"sliding_window", 4},
                                   {"vocab_size", V}}}};
  std::vector<std::pair<std::string, Tensor>> lm;
  uint64_t seed = 1;
  auto add = [&](const std::string& n, const Shape& s, float scale) {
    lm.emplace_back(n, random_tensor(s, seed++, -scale, scale));
  };
  add("embed_tokens.weight", {V, D}, 0.05f);
  add("norm.weight", {D}, 0.1f);
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    for (const char* n : {"input_layernorm", "post_attention_layernorm",
                          "pre_feedforward_layernorm", "post_feedforward_layernorm"})
      add(p + n + ".weight", {D}, 0.1f);
    add(p + "self_attn.q_proj.weight", {H * Dh, D}, 0.06f);
    add(p + "self_attn.k_proj.weight", {Hkv * Dh, D}, 0.06f);
    add(p + "self_attn.v_proj.weight", {Hkv * Dh, D}, 0.06f);
    add(p + "self_attn.o_proj.weight", {D, H * Dh}, 0.06f);
    add(p + "self_attn.q_norm.weight", {Dh}, 0.1f);
    add(p + "self_attn.k_norm.weight", {Dh}, 0.1f);
    add(p + "mlp.gate_proj.weight", {F, D}, 0.06f);
    add(p + "mlp.up_proj.weight", {F, D}, 0.06f);
    add(p + "mlp.down_proj.weight", {D, F}, 0.06f);
  }
  LlamaGemmaGgufOptions o;
  o.linear = linear;
  o.embedding = embedding;
  write_llama_gemma3_gguf(config, tokenizer, "", lm, out, o);
}

// Ids [1, 13] (a golden prompt's start and an image soft token) and an all-ones mask.
inline std::pair<Tensor, Tensor> wide_gemma3_inputs() {
  return {Tensor::from_vector(
              std::vector<int64_t>{2, 316, 414, 443, 410, 998, 475, 406, 483, 533, 440, 295, 1087},
              {1, 13}),
          Tensor::full({1, 13}, 1.0, DType::I64)};
}

}  // namespace ltx::test
