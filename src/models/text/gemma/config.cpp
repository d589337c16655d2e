#include "models/text/gemma/config.h"

#include <cmath>

#include "core/error.h"

namespace ltx::text {

using json = nlohmann::json;

const char* gemma_family_name(GemmaFamily family) {
  switch (family) {
    case GemmaFamily::Gemma3:
      return "gemma3";
    case GemmaFamily::Gemma4Unified:
      return "gemma4_unified";
    case GemmaFamily::Gemma4:
      return "gemma4";
  }
  return "?";
}

const char* gemma_layer_type_name(GemmaLayerType type) {
  return type == GemmaLayerType::Full ? "full_attention" : "sliding_attention";
}

namespace {

// Typed readers of optional keys (absent or null -> the default); a value of the wrong type is an
// error naming the key and the file.
struct Reader {
  const json& obj;
  std::string where;  // "<source> text_config"

  bool has(const char* key) const { return obj.contains(key) && !obj.at(key).is_null(); }

  int64_t integer(const char* key, int64_t def) const {
    if (!has(key)) return def;
    const json& v = obj.at(key);
    LTX_CHECK(v.is_number_integer(), "Gemma config ", where, ": '", key,
              "' must be an integer, got ", v.dump());
    return v.get<int64_t>();
  }
  double number(const char* key, double def) const {
    if (!has(key)) return def;
    const json& v = obj.at(key);
    LTX_CHECK(v.is_number(), "Gemma config ", where, ": '", key, "' must be a number, got ",
              v.dump());
    return v.get<double>();
  }
  std::optional<double> optional_number(const char* key) const {
    if (!has(key)) return std::nullopt;
    return number(key, 0.0);
  }
  bool boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    const json& v = obj.at(key);
    LTX_CHECK(v.is_boolean(), "Gemma config ", where, ": '", key, "' must be true or false, got ",
              v.dump());
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    const json& v = obj.at(key);
    LTX_CHECK(v.is_string(), "Gemma config ", where, ": '", key, "' must be a string, got ",
              v.dump());
    return v.get<std::string>();
  }
  int64_t positive(const char* key, int64_t def) const {
    const int64_t v = integer(key, def);
    LTX_CHECK(v > 0, "Gemma config ", where, ": '", key, "' must be positive, got ", v);
    return v;
  }
};

std::vector<int64_t> token_id_list(const json& v, const std::string& where, const char* key) {
  std::vector<int64_t> out;
  if (v.is_null()) return out;
  if (v.is_number_integer()) return {v.get<int64_t>()};
  LTX_CHECK(v.is_array(), "Gemma config ", where, ": '", key,
            "' must be an integer or a list of integers, got ", v.dump());
  for (const auto& e : v) {
    LTX_CHECK(e.is_number_integer(), "Gemma config ", where, ": '", key,
              "' must hold integers, got ", v.dump());
    out.push_back(e.get<int64_t>());
  }
  return out;
}

GemmaRope parse_rope(const json& p, const std::string& where, const std::string& layer_type,
                     double default_theta) {
  LTX_CHECK(p.is_object(), "Gemma config ", where, ": rope_parameters['", layer_type,
            "'] must be an object, got ", p.dump(),
            " (a layer type without RoPE is not supported)");
  const Reader r{p, where + " rope_parameters['" + layer_type + "']"};
  GemmaRope rope;
  rope.rope_type = r.string("rope_type", r.string("type", "default"));
  rope.theta = r.number("rope_theta", default_theta);
  rope.factor = r.number("factor", 1.0);
  rope.partial_rotary_factor = r.number("partial_rotary_factor", 1.0);
  if (rope.rope_type == "default") {
    rope.factor = 1.0;  // HF's default init reads neither factor nor partial_rotary_factor
    rope.partial_rotary_factor = 1.0;
  } else if (rope.rope_type == "linear") {
    LTX_CHECK(r.has("factor"), "Gemma config ", r.where, ": linear RoPE needs 'factor'");
    LTX_CHECK(rope.partial_rotary_factor == 1.0, "Gemma config ", r.where,
              ": linear RoPE with partial_rotary_factor ", rope.partial_rotary_factor,
              " is not supported (HF's Gemma attention rotates the whole head)");
  } else if (rope.rope_type == "proportional") {
    LTX_CHECK(rope.partial_rotary_factor >= 0.0 && rope.partial_rotary_factor <= 1.0,
              "Gemma config ", r.where, ": partial_rotary_factor must lie in [0, 1], got ",
              rope.partial_rotary_factor);
  } else {
    fail("Gemma config ", r.where, ": rope_type '", rope.rope_type,
         "' is not supported (default, linear and proportional are; the Gemma 3 / Gemma 4 "
         "checkpoints LTX uses need no other)");
  }
  LTX_CHECK(rope.theta > 0 && rope.factor > 0, "Gemma config ", r.where,
            ": rope_theta and factor must be positive");
  return rope;
}

std::vector<GemmaLayerType> parse_layer_types(const Reader& r, int64_t num_layers, int pattern,
                                              bool force_last_full) {
  std::vector<GemmaLayerType> types;
  if (r.has("layer_types")) {
    const json& v = r.obj.at("layer_types");
    LTX_CHECK(v.is_array(), "Gemma config ", r.where, ": 'layer_types' must be a list");
    for (const auto& e : v) {
      const std::string s = e.is_string() ? e.get<std::string>() : e.dump();
      if (s == "sliding_attention")
        types.push_back(GemmaLayerType::Sliding);
      else if (s == "full_attention")
        types.push_back(GemmaLayerType::Full);
      else
        fail("Gemma config ", r.where, ": unknown layer type ", e.dump(),
             " in 'layer_types' (expected sliding_attention or full_attention)");
    }
    LTX_CHECK(static_cast<int64_t>(types.size()) == num_layers, "Gemma config ", r.where,
              ": 'layer_types' has ", types.size(), " entries but num_hidden_layers is ",
              num_layers);
  } else {
    LTX_CHECK(pattern > 0, "Gemma config ", r.where, ": sliding_window_pattern must be positive");
    for (int64_t i = 0; i < num_layers; ++i)
      types.push_back((i + 1) % pattern != 0 ? GemmaLayerType::Sliding : GemmaLayerType::Full);
  }
  // Gemma 4 config classes force the last layer to full attention (with a warning).
  if (force_last_full && !types.empty()) types.back() = GemmaLayerType::Full;
  return types;
}

void parse_gemma3(const json& top, const Reader& r, GemmaTextConfig& c) {
  c.vocab_size = r.positive("vocab_size", 262208);
  c.hidden_size = r.positive("hidden_size", 2304);
  const int64_t intermediate = r.positive("intermediate_size", 9216);
  c.num_layers = r.positive("num_hidden_layers", 26);
  c.num_heads = r.positive("num_attention_heads", 8);
  const int64_t kv_heads = r.positive("num_key_value_heads", 4);
  const int64_t head_dim = r.positive("head_dim", 256);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.sliding_window = r.positive("sliding_window", 4096);
  c.attention_bias = r.boolean("attention_bias", false);
  c.hidden_activation = r.string("hidden_activation", "gelu_pytorch_tanh");
  const double qpas = r.number("query_pre_attn_scalar", 256);
  LTX_CHECK(qpas > 0, "Gemma config ", r.where, ": query_pre_attn_scalar must be positive");
  c.attention_scale = std::pow(qpas, -0.5);
  c.norm_adds_one = true;
  c.final_logit_softcapping = r.optional_number("final_logit_softcapping");
  // attn_logit_softcapping is accepted and, like HF's Gemma 3 attention, not applied.
  LTX_CHECK(!r.boolean("use_bidirectional_attention", false), "Gemma config ", r.where,
            ": use_bidirectional_attention=true (an embedding model) is not supported");
  c.pad_token_id = r.integer("pad_token_id", 0);

  const int pattern = static_cast<int>(r.integer("sliding_window_pattern", 6));
  const auto types = parse_layer_types(r, c.num_layers, pattern, false);

  // RoPE: per-layer-type rope_parameters, or the legacy keys.
  const double theta = r.number("rope_theta", 1'000'000.0);
  const double local_theta = r.number("rope_local_base_freq", 10'000.0);
  if (r.has("rope_parameters")) {
    const json& p = r.obj.at("rope_parameters");
    LTX_CHECK(p.is_object() && p.contains("sliding_attention") && p.contains("full_attention"),
              "Gemma config ", r.where,
              ": rope_parameters must have 'sliding_attention' and 'full_attention' entries");
    c.rope_sliding =
        parse_rope(p.at("sliding_attention"), r.where, "sliding_attention", local_theta);
    c.rope_full = parse_rope(p.at("full_attention"), r.where, "full_attention", theta);
  } else {
    json full = r.has("rope_scaling") ? r.obj.at("rope_scaling") : json::object();
    LTX_CHECK(full.is_object(), "Gemma config ", r.where, ": rope_scaling must be an object");
    if (!full.contains("rope_type") && !full.contains("type")) full["rope_type"] = "default";
    if (!full.contains("rope_theta")) full["rope_theta"] = theta;
    c.rope_full = parse_rope(full, r.where, "full_attention", theta);
    c.rope_sliding = parse_rope(json{{"rope_type", "default"}, {"rope_theta", local_theta}},
                                r.where, "sliding_attention", local_theta);
  }

  for (const auto t : types) {
    GemmaLayerSpec s;
    s.type = t;
    s.head_dim = head_dim;
    s.num_kv_heads = kv_heads;
    s.intermediate_size = intermediate;
    c.layers.push_back(s);
  }

  // Gemma3Model replaces its image token with 0 when it lies outside the vocabulary.
  const Reader top_r{top, c.source};
  const int64_t image_token =
      top_r.integer("image_token_index", top_r.integer("image_token_id", 262144));
  if (image_token >= c.vocab_size) c.replaced_token_ids.push_back(image_token);
  c.replacement_token_id = 0;
}

void parse_gemma4(const json& top, const Reader& r, GemmaTextConfig& c, bool unified) {
  c.vocab_size = r.positive("vocab_size", 262144);
  c.hidden_size = r.positive("hidden_size", 2304);
  const int64_t intermediate = r.positive("intermediate_size", 9216);
  c.num_layers = r.positive("num_hidden_layers", 30);
  c.num_heads = r.positive("num_attention_heads", 8);
  const int64_t kv_heads = r.positive("num_key_value_heads", 4);
  const int64_t head_dim = r.positive("head_dim", 256);
  const int64_t global_head_dim = r.positive("global_head_dim", 512);
  const int64_t global_kv_heads = r.integer("num_global_key_value_heads", 0);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.sliding_window = r.positive("sliding_window", unified ? 1024 : 512);
  c.attention_bias = r.boolean("attention_bias", false);
  c.hidden_activation = r.string("hidden_activation", "gelu_pytorch_tanh");
  c.attention_scale = 1.0;
  c.v_norm = true;
  c.layer_scalar = true;
  c.final_logit_softcapping = r.optional_number("final_logit_softcapping");
  c.pad_token_id = r.integer("pad_token_id", 0);
  const bool k_eq_v = r.boolean("attention_k_eq_v", false);
  const int64_t num_shared = r.integer("num_kv_shared_layers", 0);
  const bool double_wide = r.boolean("use_double_wide_mlp", false);

  if (r.has("use_bidirectional_attention")) {
    const json& v = r.obj.at("use_bidirectional_attention");
    // "vision" only changes the mask around image / video tokens, which text prompts lack.
    LTX_CHECK(v.is_string() && v.get<std::string>() == "vision", "Gemma config ", r.where,
              ": use_bidirectional_attention=", v.dump(),
              " is not supported (text decoding is causal; only null or \"vision\" are)");
  }
  LTX_CHECK(!r.boolean("enable_moe_block", false), "Gemma config ", r.where,
            ": enable_moe_block=true (mixture-of-experts Gemma 4) is not supported");
  if (!unified) {
    c.hidden_size_per_layer_input = r.integer("hidden_size_per_layer_input", 256);
    c.vocab_size_per_layer_input = r.integer("vocab_size_per_layer_input", 262144);
    LTX_CHECK(c.hidden_size_per_layer_input >= 0 && c.vocab_size_per_layer_input > 0,
              "Gemma config ", r.where,
              ": hidden_size_per_layer_input / vocab_size_per_layer_input out of range");
  }

  const auto types = parse_layer_types(r, c.num_layers, 6, true);
  if (r.has("rope_parameters")) {
    const json& p = r.obj.at("rope_parameters");
    LTX_CHECK(p.is_object(), "Gemma config ", r.where, ": rope_parameters must be an object");
    for (const auto t : {GemmaLayerType::Sliding, GemmaLayerType::Full}) {
      const char* name = gemma_layer_type_name(t);
      bool used = false;
      for (const auto u : types) used = used || u == t;
      if (!used) continue;
      LTX_CHECK(p.contains(name), "Gemma config ", r.where, ": rope_parameters has no '", name,
                "' entry");
      (t == GemmaLayerType::Full ? c.rope_full : c.rope_sliding) =
          parse_rope(p.at(name), r.where, name, 10000.0);
    }
  } else {
    c.rope_sliding = parse_rope(json{{"rope_type", "default"}, {"rope_theta", 10000.0}}, r.where,
                                "sliding_attention", 10000.0);
    c.rope_full = parse_rope(json{{"rope_type", "proportional"},
                                  {"partial_rotary_factor", 0.25},
                                  {"rope_theta", 1'000'000.0}},
                             r.where, "full_attention", 1'000'000.0);
  }

  LTX_CHECK(num_shared >= 0 && num_shared <= c.num_layers, "Gemma config ", r.where,
            ": num_kv_shared_layers=", num_shared, " out of range");
  const int64_t first_shared = c.num_layers - num_shared;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    GemmaLayerSpec s;
    s.type = types[static_cast<size_t>(i)];
    const bool full = s.type == GemmaLayerType::Full;
    s.head_dim = full ? global_head_dim : head_dim;
    s.k_eq_v = k_eq_v && full;
    s.num_kv_heads = (s.k_eq_v && global_kv_heads > 0) ? global_kv_heads : kv_heads;
    const bool shared = i >= first_shared;
    s.intermediate_size = intermediate * ((double_wide && shared && first_shared > 0) ? 2 : 1);
    if (shared) {
      for (int64_t j = first_shared - 1; j >= 0; --j)
        if (types[static_cast<size_t>(j)] == s.type) {
          s.kv_source = j;
          break;
        }
      LTX_CHECK(s.kv_source >= 0, "Gemma config ", r.where, ": KV-shared layer ", i, " (",
                gemma_layer_type_name(s.type), ") has no earlier layer of its type to share");
    }
    c.layers.push_back(s);
  }

  const Reader top_r{top, c.source};
  for (const char* key : {"image_token_id", "video_token_id", "audio_token_id"}) {
    const int64_t def = std::string(key) == "image_token_id"   ? 258880
                        : std::string(key) == "video_token_id" ? 258884
                                                               : 258881;
    c.replaced_token_ids.push_back(top_r.integer(key, def));
  }
  c.replacement_token_id = c.pad_token_id;
}

}  // namespace

GemmaTextConfig GemmaTextConfig::from_json(const json& config, const std::string& source) {
  LTX_CHECK(config.is_object(), "Gemma config from ", source, " is not a JSON object");
  GemmaTextConfig c;
  c.source = source;
  const Reader top{config, source};
  c.model_type = top.string("model_type", "");
  LTX_CHECK(!c.model_type.empty(), "Gemma config from ", source, " has no model_type");
  if (c.model_type == "gemma3")
    c.family = GemmaFamily::Gemma3;
  else if (c.model_type == "gemma4_unified")
    c.family = GemmaFamily::Gemma4Unified;
  else if (c.model_type == "gemma4")
    c.family = GemmaFamily::Gemma4;
  else
    fail("Gemma config from ", source, ": model_type '", c.model_type,
         "' is not supported (the reference supports gemma3, gemma4 and gemma4_unified)");
  if (top.has("gemma_version")) c.gemma_version = top.string("gemma_version", "");

  const json empty = json::object();
  const json& text = top.has("text_config") ? config.at("text_config") : empty;
  LTX_CHECK(text.is_object(), "Gemma config from ", source, ": text_config must be an object");
  const Reader r{text, source + " text_config"};
  switch (c.family) {
    case GemmaFamily::Gemma3:
      parse_gemma3(config, r, c);
      break;
    case GemmaFamily::Gemma4Unified:
      parse_gemma4(config, r, c, true);
      break;
    case GemmaFamily::Gemma4:
      parse_gemma4(config, r, c, false);
      break;
  }
  bool known_activation = false;
  for (const char* act : {"gelu_pytorch_tanh", "gelu", "silu", "relu"})
    known_activation = known_activation || c.hidden_activation == act;
  LTX_CHECK(known_activation, "Gemma config ", r.where, ": hidden_activation '",
            c.hidden_activation, "' is not supported (gelu_pytorch_tanh, gelu, silu, relu are)");
  for (const auto& l : c.layers)
    LTX_CHECK(c.num_heads % l.num_kv_heads == 0, "Gemma config ", r.where, ": num_attention_heads ",
              c.num_heads, " is not a multiple of the ", l.num_kv_heads, " key/value heads");

  // generate() reads eos_token_id from the top-level config first, then from text_config.
  if (top.has("eos_token_id"))
    c.eos_token_ids = token_id_list(config.at("eos_token_id"), source, "eos_token_id");
  else
    c.eos_token_ids = r.has("eos_token_id")
                          ? token_id_list(text.at("eos_token_id"), r.where, "eos_token_id")
                          : std::vector<int64_t>{1};
  return c;
}

int64_t GemmaTextConfig::rope_head_dim(GemmaLayerType type) const {
  for (const auto& l : layers)
    if (l.type == type) return l.head_dim;
  return 0;
}

bool GemmaTextConfig::has_layer_type(GemmaLayerType type) const {
  for (const auto& l : layers)
    if (l.type == type) return true;
  return false;
}

std::vector<float> gemma_rope_inv_freq(const GemmaRope& rope, int64_t head_dim) {
  LTX_CHECK(head_dim > 0 && head_dim % 2 == 0, "Gemma RoPE: head_dim must be even, got ", head_dim);
  const int64_t half = head_dim / 2;
  // float32 throughout, as torch computes base ** (arange(0, d, 2).float() / d).
  const float base = static_cast<float>(rope.theta);
  const float dim = static_cast<float>(head_dim);
  int64_t rotated = half;
  if (rope.rope_type == "proportional")
    rotated =
        static_cast<int64_t>(rope.partial_rotary_factor * static_cast<double>(head_dim) / 2.0);
  std::vector<float> inv(static_cast<size_t>(half), 0.0f);
  const float factor = static_cast<float>(rope.factor);
  for (int64_t i = 0; i < rotated; ++i) {
    const float e = static_cast<float>(2 * i) / dim;
    float v = 1.0f / std::pow(base, e);
    if (rope.rope_type != "default") v = v / factor;
    inv[static_cast<size_t>(i)] = v;
  }
  return inv;
}

}  // namespace ltx::text
