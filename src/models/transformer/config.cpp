#include "models/transformer/config.h"

#include <set>

#include "core/error.h"

namespace ltx::models::transformer {

const char* model_type_name(LTXModelType type) {
  switch (type) {
    case LTXModelType::AudioVideo: return "audio-video";
    case LTXModelType::VideoOnly: return "video-only";
    case LTXModelType::AudioOnly: return "audio-only";
  }
  return "?";
}

namespace {

using json = nlohmann::json;
using models::ConfigReader;
using models::py_equal;
using models::transformer_config_section;

// Keys of config["transformer"] that some part of the reference reads, asserts, or that the
// published files carry without anyone reading them. Anything else is an error (a newer format
// this code does not know). Keys starting with '_' (_class_name, _diffusers_version) are
// bookkeeping and always accepted.
const std::set<std::string>& known_keys() {
  static const std::set<std::string> kKeys = {
      // read by the transformer configurators
      "num_attention_heads", "attention_head_dim", "in_channels", "out_channels", "num_layers",
      "cross_attention_dim", "norm_eps", "positional_embedding_theta",
      "positional_embedding_max_pos", "timestep_scale_multiplier", "use_middle_indices_grid",
      "audio_num_attention_heads", "audio_attention_head_dim", "audio_in_channels",
      "audio_out_channels", "audio_cross_attention_dim", "audio_positional_embedding_max_pos",
      "av_ca_timestep_scale_multiplier", "rope_type", "frequencies_precision",
      "apply_gated_attention", "cross_attention_adaln", "use_prompt_adaln_single", "ff_bias",
      "audio_ff_bias", "use_keyframes_abs_pos_embedding", "caption_channels",
      "caption_proj_before_connector",
      // asserted by the configurators (check_config_value)
      "dropout", "attention_bias", "num_vector_embeds", "activation_fn", "num_embeds_ada_norm",
      "use_linear_projection", "only_cross_attention", "cross_attention_norm",
      "double_self_attention", "upcast_attention", "standardization_norm",
      "norm_elementwise_affine", "qk_norm", "positional_embedding_type",
      "use_audio_video_cross_attention", "share_ff", "av_cross_ada_norm",
      // read by the text-embedding side (feature extractor / connectors), checked there
      "caption_projection_first_linear", "caption_projection_second_linear",
      "caption_proj_input_norm", "text_encoder_norm_type",
      // in the published files, read by nobody
      "attention_type", "causal_temporal_positioning", "norm_num_groups",
      "use_embeddings_connector"};
  return kKeys;
}

bool is_known_key(const std::string& key) {
  if (!key.empty() && key[0] == '_') return true;
  if (key.rfind("connector_", 0) == 0 || key.rfind("audio_connector_", 0) == 0) return true;
  return known_keys().count(key) != 0;
}

}  // namespace

LTXModelConfig LTXModelConfig::from_metadata(const json& metadata, LTXModelType type,
                                             const std::string& source) {
  const json t = transformer_config_section(metadata, source);
  const ConfigReader r(t, source);

  for (const auto& [key, value] : t.items())
    if (!is_known_key(key))
      r.error(key, str("is not a key this code knows (value ", value.dump(),
                       "); the checkpoint may be newer than this build"));

  // The configurators' exact-value assertions.
  r.check("dropout", 0.0);
  r.check("attention_bias", true);
  r.check("num_vector_embeds", nullptr);
  r.check("activation_fn", "gelu-approximate");
  r.check("num_embeds_ada_norm", 1000);
  r.check("use_linear_projection", false);
  r.check("only_cross_attention", false);
  r.check("cross_attention_norm", true);
  r.check("double_self_attention", false);
  r.check("upcast_attention", false);
  r.check("standardization_norm", "rms_norm");
  r.check("norm_elementwise_affine", false);
  r.check("qk_norm", "rms_norm");
  r.check("positional_embedding_type", "rope");
  if (type == LTXModelType::AudioVideo) {
    r.check("use_audio_video_cross_attention", true);
    r.check("share_ff", false);
    r.check("av_cross_ada_norm", true);
  }
  r.check("use_middle_indices_grid", true);
  if (type == LTXModelType::AudioVideo) {
    // The cross-modal RoPE is cut into the video head count and applied to audio-width heads,
    // so the reference requires both head counts, equal.
    const json* v = r.find("num_attention_heads");
    const json* a = r.find("audio_num_attention_heads");
    if (!v || !a || !py_equal(*v, *a))
      r.error("num_attention_heads",
              str("is ", v ? v->dump() : "absent", " and audio_num_attention_heads is ",
                  a ? a->dump() : "absent", "; the audio-video model requires both, equal"));
  }

  LTXModelConfig c;
  c.model_type = type;
  c.source = source;
  c.num_layers = r.integer("num_layers", 48);
  c.norm_eps = r.number("norm_eps", 1e-6);
  c.timestep_scale_multiplier = r.number("timestep_scale_multiplier", 1000);
  c.use_middle_indices_grid = r.boolean("use_middle_indices_grid", true);
  c.apply_gated_attention = r.boolean("apply_gated_attention", false);
  c.cross_attention_adaln = r.boolean("cross_attention_adaln", false);

  c.rope_type = rope_type_from_config(r);
  c.double_precision_rope = double_precision_rope_from_config(r);

  if (is_video_enabled(type)) {
    c.num_attention_heads = r.integer("num_attention_heads", 32);
    c.attention_head_dim = r.integer("attention_head_dim", 128);
    c.in_channels = r.integer("in_channels", 128);
    c.out_channels = r.integer("out_channels", 128);
    c.cross_attention_dim = r.integer("cross_attention_dim", 4096);
    c.positional_embedding_theta = r.number("positional_embedding_theta", 10000.0);
    c.positional_embedding_max_pos = r.numbers("positional_embedding_max_pos", {20, 2048, 2048});
    c.use_prompt_adaln_single = r.boolean("use_prompt_adaln_single", true);
    c.ff_bias = r.boolean("ff_bias", true);
    c.use_keyframes_abs_pos_embedding = r.boolean("use_keyframes_abs_pos_embedding", false);
  }
  if (is_audio_enabled(type)) {
    c.audio_num_attention_heads = r.integer("audio_num_attention_heads", 32);
    c.audio_attention_head_dim = r.integer("audio_attention_head_dim", 64);
    c.audio_in_channels = r.integer("audio_in_channels", 128);
    c.audio_out_channels = r.integer("audio_out_channels", 128);
    c.audio_cross_attention_dim = r.integer("audio_cross_attention_dim", 2048);
    c.audio_positional_embedding_max_pos = r.numbers("audio_positional_embedding_max_pos", {20});
  }
  if (type == LTXModelType::AudioVideo) {
    c.audio_ff_bias = r.boolean("audio_ff_bias", true);
    // A JSON float in the published files (1000.0); absent means the code default 1.
    c.av_ca_timestep_scale_multiplier = r.number("av_ca_timestep_scale_multiplier", 1);
  } else {
    // Validate the keys this configurator ignores, so that a typo never passes silently.
    (void)r.boolean("audio_ff_bias", true);
    (void)r.number("av_ca_timestep_scale_multiplier", 1);
    if (type == LTXModelType::AudioOnly) {
      (void)r.boolean("use_prompt_adaln_single", true);
      (void)r.boolean("ff_bias", true);
      (void)r.boolean("use_keyframes_abs_pos_embedding", false);
      (void)r.number("positional_embedding_theta", 10000.0);
    }
  }

  // 19B: the caption projection lives in the transformer (absent caption_proj_before_connector).
  c.caption_projection = !r.boolean("caption_proj_before_connector", false);
  if (c.caption_projection) {
    // create_caption_projection indexes these keys directly (KeyError when absent).
    for (const char* key : {"caption_channels", "num_attention_heads", "attention_head_dim"})
      if (!r.find(key)) r.error(key, "is required for a checkpoint whose caption projection is in the transformer (no caption_proj_before_connector)");
    if (is_audio_enabled(type))
      for (const char* key : {"audio_num_attention_heads", "audio_attention_head_dim"})
        if (!r.find(key)) r.error(key, "is required for a checkpoint whose caption projection is in the transformer (no caption_proj_before_connector)");
    c.caption_channels = r.integer("caption_channels", 0);
  } else if (const json* v = r.find("caption_channels")) {
    (void)v;
    c.caption_channels = r.integer("caption_channels", 0);
  }

  // Contradictions the reference would only hit as a shape error at run time.
  if (is_video_enabled(type)) {
    if (c.attention_head_dim % 2 != 0)
      r.error("attention_head_dim", str("must be even for rotary embeddings, got ", c.attention_head_dim));
    if (c.cross_attention_dim != c.inner_dim())
      r.error("cross_attention_dim",
              str("is ", c.cross_attention_dim, " but the text context is viewed at the video inner dim ",
                  c.inner_dim(), " (num_attention_heads * attention_head_dim); they must be equal"));
  }
  if (is_audio_enabled(type)) {
    if (c.audio_attention_head_dim % 2 != 0)
      r.error("audio_attention_head_dim",
              str("must be even for rotary embeddings, got ", c.audio_attention_head_dim));
    if (c.audio_cross_attention_dim != c.audio_inner_dim())
      r.error("audio_cross_attention_dim",
              str("is ", c.audio_cross_attention_dim, " but the audio inner dim is ", c.audio_inner_dim(),
                  " (audio_num_attention_heads * audio_attention_head_dim); they must be equal"));
  }
  return c;
}

LTXRopeType rope_type_from_config(const ConfigReader& r) {
  const json* v = r.find("rope_type");
  if (!v || *v == "split") return LTXRopeType::Split;
  if (*v == "interleaved") return LTXRopeType::Interleaved;
  r.error("rope_type", str("must be \"split\" or \"interleaved\", got ", v->dump()));
}

bool double_precision_rope_from_config(const ConfigReader& r) {
  const json* v = r.find("frequencies_precision");
  // The reference only tests == "float64"; other spellings are refused rather than guessed.
  if (!v || *v == "float32" || *v == false) return false;
  if (*v == "float64") return true;
  r.error("frequencies_precision", str("must be \"float64\" or \"float32\", got ", v->dump()));
}

LTXModelConfig LTXModelConfig::from_file(const io::SafetensorsFile& file, LTXModelType type) {
  return from_metadata(file.metadata_json(), type, file.path());
}

}  // namespace ltx::models::transformer
