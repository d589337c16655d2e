#include "io/llama_gguf.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ltx::io {

using json = nlohmann::json;

namespace {

constexpr const char* kLlamaGgufArchKey = "general.architecture";

std::string llama_gguf_arch(const GgufFile& f) {
  const GgufMetadata* a = f.find(kLlamaGgufArchKey);
  if (a == nullptr || a->type != GgufValueType::String) return {};
  return a->value.get<std::string>();
}

bool is_gguf_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::U16:
    case GgufValueType::I16:
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::U64:
    case GgufValueType::I64:
      return true;
    default:
      return false;
  }
}

// Typed readers of the file's metadata; a mistyped value is an error naming the file and key.
struct LlamaGgufMeta {
  const GgufFile& f;

  [[noreturn]] void bad(const std::string& key, const std::string& problem) const {
    fail("llama.cpp Gemma 3 GGUF ", f.path(), ": metadata '", key, "' ", problem);
  }
  const GgufMetadata* get(const std::string& key) const { return f.find(key); }

  std::optional<int64_t> opt_int(const std::string& key) const {
    const GgufMetadata* m = get(key);
    if (m == nullptr) return std::nullopt;
    if (!is_gguf_integer_type(m->type))
      bad(key, str("is a ", gguf_value_type_name(m->type), ", expected an integer"));
    return m->value.get<int64_t>();
  }
  int64_t positive(const std::string& key) const {
    const auto v = opt_int(key);
    if (!v) bad(key, "is missing (the converter writes it; is this a complete Gemma 3 GGUF?)");
    if (*v <= 0) bad(key, str("must be positive, got ", *v));
    return *v;
  }
  std::optional<double> opt_number(const std::string& key) const {
    const GgufMetadata* m = get(key);
    if (m == nullptr) return std::nullopt;
    if (m->type != GgufValueType::F32 && m->type != GgufValueType::F64 &&
        !is_gguf_integer_type(m->type))
      bad(key, str("is a ", gguf_value_type_name(m->type), ", expected a number"));
    return m->value.get<double>();
  }
  std::optional<std::string> opt_string(const std::string& key) const {
    const GgufMetadata* m = get(key);
    if (m == nullptr) return std::nullopt;
    if (m->type != GgufValueType::String)
      bad(key, str("is a ", gguf_value_type_name(m->type), ", expected a string"));
    return m->value.get<std::string>();
  }
  std::optional<bool> opt_bool(const std::string& key) const {
    const GgufMetadata* m = get(key);
    if (m == nullptr) return std::nullopt;
    if (m->type != GgufValueType::Bool)
      bad(key, str("is a ", gguf_value_type_name(m->type), ", expected a bool"));
    return m->value.get<bool>();
  }
  // An array of `what` elements (checked by `ok`), or an error naming the key.
  template <class Ok>
  const json& array(const std::string& key, const char* what, Ok ok) const {
    const GgufMetadata* m = get(key);
    if (m == nullptr) bad(key, "is missing; the GGUF carries no tokenizer vocabulary");
    if (m->type != GgufValueType::Array || !ok(m->element_type))
      bad(key, str("must be an array of ", what, ", got ",
                   m->type == GgufValueType::Array
                       ? str("an array of ", gguf_value_type_name(m->element_type))
                       : std::string(gguf_value_type_name(m->type))));
    return m->value;
  }
};

std::string gemma3_key(const char* suffix) {
  return std::string(kLlamaCppGemma3Arch) + "." + suffix;
}

}  // namespace

bool is_llama_cpp_gemma3(const GgufFile& file) {
  return llama_gguf_arch(file) == kLlamaCppGemma3Arch;
}

void require_llama_cpp_gemma3(const GgufFile& file) {
  const GgufMetadata* a = file.find(kLlamaGgufArchKey);
  const std::string got = a == nullptr ? std::string("absent")
                          : a->type == GgufValueType::String
                              ? "'" + a->value.get<std::string>() + "'"
                              : str("a ", gguf_value_type_name(a->type));
  LTX_CHECK(is_llama_cpp_gemma3(file), "GGUF text encoder ", file.path(), ": metadata '",
            kLlamaGgufArchKey, "' is ", got,
            ", not 'gemma3'; ltx reads llama.cpp's Gemma 3 GGUF files as the text encoder (e.g. "
            "gemma-3-12b-it-Q4_K_M.gguf). A transformer GGUF goes to --transformer-path");
}

const std::vector<KeyRename>& llama_cpp_gemma3_renames() {
  // Prefixes first, then the per-block names; each pattern carries the dots around the name, so
  // ".attn_q." never matches inside ".attn_q_norm.".
  static const std::vector<KeyRename> renames = {
      {"token_embd.", "embed_tokens.", true},
      {"output_norm.", "norm.", true},
      {"blk.", "layers.", true},
      {".attn_norm.", ".input_layernorm.", false},
      {".attn_q_norm.", ".self_attn.q_norm.", false},
      {".attn_k_norm.", ".self_attn.k_norm.", false},
      {".attn_q.", ".self_attn.q_proj.", false},
      {".attn_k.", ".self_attn.k_proj.", false},
      {".attn_v.", ".self_attn.v_proj.", false},
      {".attn_output.", ".self_attn.o_proj.", false},
      {".post_attention_norm.", ".post_attention_layernorm.", false},
      {".ffn_norm.", ".pre_feedforward_layernorm.", false},
      {".post_ffw_norm.", ".post_feedforward_layernorm.", false},
      {".ffn_gate.", ".mlp.gate_proj.", false},
      {".ffn_up.", ".mlp.up_proj.", false},
      {".ffn_down.", ".mlp.down_proj.", false},
  };
  return renames;
}

KeyMap llama_cpp_gemma3_key_map() {
  KeyMap m("llama.cpp Gemma 3 GGUF");
  m.keep("token_embd.").keep("output_norm.").keep("blk.");
  for (const KeyRename& r : llama_cpp_gemma3_renames()) {
    if (r.prefix)
      m.replace_prefix(r.from, r.to);
    else
      m.replace(r.from, r.to);
  }
  return m;
}

std::optional<std::string> llama_cpp_gemma3_model_name(const std::string& gguf_name) {
  static const KeyMap map = llama_cpp_gemma3_key_map();
  return map.apply(gguf_name);
}

std::optional<std::string> llama_cpp_gemma3_hf_name(const std::string& gguf_name) {
  auto n = llama_cpp_gemma3_model_name(gguf_name);
  if (n) *n = "language_model.model." + *n;
  return n;
}

bool llama_cpp_norm_stored_plus_one(const std::string& model_name) {
  return model_name.ends_with("norm.weight");
}

json llama_cpp_gemma3_config(const GgufFile& file) {
  require_llama_cpp_gemma3(file);
  const LlamaGgufMeta m{file};
  const int64_t layers = m.positive(gemma3_key("block_count"));
  const int64_t hidden = m.positive(gemma3_key("embedding_length"));
  const int64_t ff = m.positive(gemma3_key("feed_forward_length"));
  const int64_t heads = m.positive(gemma3_key("attention.head_count"));
  const int64_t kv_heads = m.opt_int(gemma3_key("attention.head_count_kv")).value_or(heads);
  if (kv_heads <= 0 || heads % kv_heads != 0)
    m.bad(gemma3_key("attention.head_count_kv"),
          str("is ", kv_heads, ", which does not divide ", gemma3_key("attention.head_count"), " ",
              heads));
  const int64_t key_len = m.opt_int(gemma3_key("attention.key_length")).value_or(hidden / heads);
  const int64_t value_len = m.opt_int(gemma3_key("attention.value_length")).value_or(key_len);
  if (key_len <= 0 || value_len != key_len)
    m.bad(gemma3_key("attention.value_length"),
          str("is ", value_len, " but ", gemma3_key("attention.key_length"), " is ", key_len,
              "; Gemma 3 has one head size"));
  const auto eps = m.opt_number(gemma3_key("attention.layer_norm_rms_epsilon"));
  if (!eps) m.bad(gemma3_key("attention.layer_norm_rms_epsilon"), "is missing");
  const int64_t window = m.positive(gemma3_key("attention.sliding_window"));

  // Every tensor of the language model, with the metadata its shape comes from.
  struct Expect {
    std::string name;
    Shape shape;
    std::string from;
  };
  std::vector<Expect> expect;
  const std::string e = gemma3_key("embedding_length");
  LTX_CHECK(file.contains("token_embd.weight"), "llama.cpp Gemma 3 GGUF ", file.path(),
            ": tensor 'token_embd.weight' (the token embedding) is missing");
  const Shape embd = file.info("token_embd.weight").shape;
  LTX_CHECK(embd.size() == 2 && embd[1] == hidden, "llama.cpp Gemma 3 GGUF ", file.path(),
            ": tensor 'token_embd.weight' is ", embd.str(), " but metadata '", e,
            "' is ", hidden, " (expected [vocabulary, ", hidden, "])");
  const int64_t vocab = embd[0];
  expect.push_back({"output_norm.weight", {hidden}, e});
  const std::string q =
      str(gemma3_key("attention.head_count"), " x ", gemma3_key("attention.key_length"));
  const std::string kv =
      str(gemma3_key("attention.head_count_kv"), " x ", gemma3_key("attention.key_length"));
  const std::string f = gemma3_key("feed_forward_length");
  for (int64_t i = 0; i < layers; ++i) {
    const std::string b = str("blk.", i, ".");
    for (const char* n : {"attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"})
      expect.push_back({b + n + ".weight", {hidden}, e});
    expect.push_back({b + "attn_q.weight", {heads * key_len, hidden}, q + ", " + e});
    expect.push_back({b + "attn_k.weight", {kv_heads * key_len, hidden}, kv + ", " + e});
    expect.push_back({b + "attn_v.weight", {kv_heads * key_len, hidden}, kv + ", " + e});
    expect.push_back({b + "attn_output.weight", {hidden, heads * key_len}, e + ", " + q});
    expect.push_back({b + "attn_q_norm.weight", {key_len}, gemma3_key("attention.key_length")});
    expect.push_back({b + "attn_k_norm.weight", {key_len}, gemma3_key("attention.key_length")});
    expect.push_back({b + "ffn_gate.weight", {ff, hidden}, f + ", " + e});
    expect.push_back({b + "ffn_up.weight", {ff, hidden}, f + ", " + e});
    expect.push_back({b + "ffn_down.weight", {hidden, ff}, e + ", " + f});
  }
  std::vector<std::string> problems;
  size_t missing = 0, misshaped = 0;
  for (const Expect& x : expect) {
    if (!file.contains(x.name)) {
      if (++missing <= 5) problems.push_back(str("tensor '", x.name, "' is missing"));
      continue;
    }
    const Shape& s = file.info(x.name).shape;
    if (s != x.shape && ++misshaped <= 5)
      problems.push_back(str("tensor '", x.name, "' is ", s.str(), ", expected ",
                             x.shape.str(), " from ", x.from));
  }
  if (!problems.empty()) {
    std::string msg;
    for (const std::string& p : problems) msg += "\n  " + p;
    if (missing > 5) msg += str("\n  ... ", missing - 5, " more missing");
    if (misshaped > 5) msg += str("\n  ... ", misshaped - 5, " more misshaped");
    fail("llama.cpp Gemma 3 GGUF ", file.path(), " does not match its metadata (",
         gemma3_key("block_count"), " ", layers, "):", msg);
  }

  json tc = json::object();
  tc["model_type"] = "gemma3_text";
  tc["vocab_size"] = vocab;
  tc["hidden_size"] = hidden;
  tc["intermediate_size"] = ff;
  tc["num_hidden_layers"] = layers;
  tc["num_attention_heads"] = heads;
  tc["num_key_value_heads"] = kv_heads;
  tc["head_dim"] = key_len;
  tc["rms_norm_eps"] = *eps;
  tc["sliding_window"] = window;
  tc["hidden_activation"] = "gelu_pytorch_tanh";
  if (auto ctx = m.opt_int(gemma3_key("context_length"))) tc["max_position_embeddings"] = *ctx;
  if (auto cap = m.opt_number(gemma3_key("final_logit_softcapping")))
    tc["final_logit_softcapping"] = *cap;

  // Attention scale: the file's, else llama.cpp's rule for Gemma 3 (the 27B's 62 layers use
  // hidden / heads, every other size the head dim), which is each model's query_pre_attn_scalar.
  if (auto scale = m.opt_number(gemma3_key("attention.scale"))) {
    if (!(*scale > 0)) m.bad(gemma3_key("attention.scale"), str("must be positive, got ", *scale));
    tc["query_pre_attn_scalar"] = 1.0 / (*scale * *scale);
  } else {
    tc["query_pre_attn_scalar"] = layers == 62 ? hidden / heads : key_len;
  }

  // Sliding / global layers: llama.cpp's pattern (6) unless the file gives one.
  if (const GgufMetadata* p = file.find(gemma3_key("attention.sliding_window_pattern"))) {
    if (is_gguf_integer_type(p->type)) {
      if (p->value.get<int64_t>() <= 0)
        m.bad(p->key, str("must be positive, got ", p->value.get<int64_t>()));
      tc["sliding_window_pattern"] = p->value.get<int64_t>();
    } else if (p->type == GgufValueType::Array && p->element_type == GgufValueType::Bool) {
      if (static_cast<int64_t>(p->value.size()) != layers)
        m.bad(p->key, str("has ", p->value.size(), " entries for ", layers, " layers"));
      json types = json::array();
      for (const json& v : p->value)
        types.push_back(v.get<bool>() ? "sliding_attention" : "full_attention");
      tc["layer_types"] = types;
    } else {
      m.bad(p->key, "must be an integer or an array of bools (true: a sliding-window layer)");
    }
  } else {
    tc["sliding_window_pattern"] = 6;
  }

  tc["rope_theta"] = m.opt_number(gemma3_key("rope.freq_base")).value_or(1'000'000.0);
  tc["rope_local_base_freq"] = m.opt_number(gemma3_key("rope.freq_base_swa")).value_or(10'000.0);
  const std::string scaling = m.opt_string(gemma3_key("rope.scaling.type")).value_or("none");
  if (scaling == "linear") {
    const auto factor = m.opt_number(gemma3_key("rope.scaling.factor"));
    if (!factor || !(*factor > 0))
      m.bad(gemma3_key("rope.scaling.factor"),
            "must be a positive number with linear RoPE scaling");
    tc["rope_scaling"] = {{"rope_type", "linear"}, {"factor", *factor}};
  } else if (scaling != "none") {
    m.bad(gemma3_key("rope.scaling.type"),
          str("is '", scaling, "'; Gemma 3 uses none or linear (the global layers' scaling)"));
  } else if (auto factor = m.opt_number(gemma3_key("rope.scaling.factor"));
             factor && *factor != 1.0) {
    m.bad(gemma3_key("rope.scaling.factor"),
          str("is ", *factor, " without a rope.scaling.type; expected 'linear'"));
  }

  json c = json::object();
  c["architectures"] = json::array({"Gemma3ForCausalLM"});
  c["model_type"] = "gemma3";
  c["text_config"] = tc;
  // Generation stops where the instruct models' config says: <eos> and <end_of_turn>.
  json eos = json::array();
  if (auto id = m.opt_int("tokenizer.ggml.eos_token_id")) eos.push_back(*id);
  if (auto id = m.opt_int("tokenizer.ggml.eot_token_id"))
    if (std::find(eos.begin(), eos.end(), json(*id)) == eos.end()) eos.push_back(*id);
  if (const GgufMetadata* toks = file.find("tokenizer.ggml.tokens"); toks && toks->value.is_array())
    for (size_t i = 0; i < toks->value.size(); ++i)
      if (toks->value[i] == "<eos>" || toks->value[i] == "<end_of_turn>")
        if (std::find(eos.begin(), eos.end(), json(i)) == eos.end()) eos.push_back(i);
  c["eos_token_id"] = eos;
  if (auto id = m.opt_int("tokenizer.ggml.padding_token_id")) tc["pad_token_id"] = *id;
  c["text_config"] = tc;
  return c;
}

json llama_cpp_tokenizer_config(const GgufFile& file) {
  const LlamaGgufMeta m{file};
  const GgufMetadata* toks = file.find("tokenizer.ggml.tokens");
  json cfg = json::object();
  auto named = [&](const char* key, const char* name) {
    const auto id = m.opt_int(str("tokenizer.ggml.", key));
    if (!id) return;
    if (toks == nullptr || toks->type != GgufValueType::Array || *id < 0 ||
        *id >= static_cast<int64_t>(toks->value.size()))
      m.bad(str("tokenizer.ggml.", key),
            str("is ", *id, ", outside the vocabulary (tokenizer.ggml.tokens, ",
                toks == nullptr ? 0 : toks->value.size(), " tokens)"));
    cfg[name] = toks->value[static_cast<size_t>(*id)];
  };
  named("bos_token_id", "bos_token");
  named("eos_token_id", "eos_token");
  named("padding_token_id", "pad_token");
  named("unknown_token_id", "unk_token");
  cfg["add_bos_token"] = m.opt_bool("tokenizer.ggml.add_bos_token").value_or(true);
  cfg["add_eos_token"] = m.opt_bool("tokenizer.ggml.add_eos_token").value_or(false);
  if (auto t = m.opt_string("tokenizer.chat_template")) cfg["chat_template"] = *t;
  return cfg;
}

LlamaSpmVocab llama_cpp_spm_vocab(const GgufFile& file) {
  const LlamaGgufMeta m{file};
  const auto model = m.opt_string("tokenizer.ggml.model");
  if (!model) m.bad("tokenizer.ggml.model", "is missing; the GGUF carries no tokenizer");
  if (*model != "llama")
    m.bad("tokenizer.ggml.model",
          str("is '", *model,
              "'; ltx reads the SentencePiece vocabulary ('llama') that Gemma 3's GGUF files "
              "carry"));
  const json& tokens = m.array("tokenizer.ggml.tokens", "strings",
                               [](GgufValueType t) { return t == GgufValueType::String; });
  const json& scores = m.array("tokenizer.ggml.scores", "numbers", [](GgufValueType t) {
    return t == GgufValueType::F32 || t == GgufValueType::F64;
  });
  const json& types = m.array("tokenizer.ggml.token_type", "integers", is_gguf_integer_type);
  if (scores.size() != tokens.size() || types.size() != tokens.size())
    m.bad("tokenizer.ggml.scores",
          str("and tokenizer.ggml.token_type have ", scores.size(), " and ", types.size(),
              " entries for ", tokens.size(), " tokens"));
  LlamaSpmVocab v;
  v.tokens.reserve(tokens.size());
  v.scores.reserve(tokens.size());
  v.types.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    v.tokens.push_back(tokens[i].get<std::string>());
    v.scores.push_back(static_cast<float>(scores[i].get<double>()));
    const int64_t t = types[i].get<int64_t>();
    if (t < 0 || t > 6)
      m.bad("tokenizer.ggml.token_type", str("entry ", i, " is ", t, " (known types: 0 to 6)"));
    v.types.push_back(static_cast<LlamaTokenType>(t));
  }
  v.add_space_prefix = m.opt_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  return v;
}

}  // namespace ltx::io
