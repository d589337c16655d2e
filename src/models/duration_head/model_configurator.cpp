#include "models/duration_head/model_configurator.h"

#include "core/error.h"
#include "models/config_json.h"

namespace ltx::models::duration_head {

using json = nlohmann::json;

namespace {

// metadata["config"][section] as an object; an absent config or section reads as {} (the
// reference's `.get(..., {})`), a present one of another type is an error.
json section(const json& metadata, const std::string& name, const std::string& where) {
  if (!metadata.is_object() || !metadata.contains("config")) return json::object();
  json config = metadata["config"];
  if (config.is_string()) {
    try {
      config = json::parse(config.get<std::string>());
    } catch (const json::exception&) {
      fail(where, ": metadata 'config' is not valid JSON");
    }
  }
  LTX_CHECK(config.is_object(), where, ": metadata 'config' must be a JSON object");
  if (!config.contains(name)) return json::object();
  LTX_CHECK(config[name].is_object(), where, ": config.", name, " must be a JSON object, got ",
            config[name].dump());
  return config[name];
}

}  // namespace

DurationHeadConfig duration_head_config_from_metadata(const json& metadata,
                                                      const std::string& where) {
  const json transformer = section(metadata, "transformer", where);
  const json head = section(metadata, "duration_head", where);
  const ConfigReader t(transformer, where, "config.transformer");
  const ConfigReader h(head, where, "config.duration_head");
  DurationHeadConfig c;
  c.video_cross_attention_dim = t.integer("cross_attention_dim", c.video_cross_attention_dim);
  c.audio_cross_attention_dim = t.integer("audio_cross_attention_dim", c.audio_cross_attention_dim);
  c.pooler_hidden_dim = h.integer("pooler_hidden_dim", c.pooler_hidden_dim);
  c.num_queries = h.integer("num_queries", c.num_queries);
  c.num_pooler_heads = h.integer("num_pooler_heads", c.num_pooler_heads);
  c.mlp_hidden = h.integer("mlp_hidden", c.mlp_hidden);
  if (c.pooler_hidden_dim % c.num_pooler_heads != 0)
    h.error("num_pooler_heads", str("(", c.num_pooler_heads, ") must divide pooler_hidden_dim (",
                                    c.pooler_hidden_dim, ")"));
  return c;
}

io::KeyMap duration_head_key_map() { return io::KeyMap::strip_prefix("duration_head."); }

bool has_duration_head(const io::SafetensorsFile& file) {
  for (const auto& name : file.names())
    if (name.rfind("duration_head.", 0) == 0) return true;
  return false;
}

}  // namespace ltx::models::duration_head
