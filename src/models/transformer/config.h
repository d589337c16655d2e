#pragma once
// The transformer's configuration, read from a checkpoint's metadata["config"]["transformer"] the
// way the reference's configurators do (model/transformer/model_configurator.py): the same keys,
// the same code defaults for absent keys, the same exact-value assertions (check_config_value).
// Stricter than the reference where it would fail later or silently: unknown keys, values of the
// wrong type and contradictory sizes are errors that name the file and the key.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/config_json.h"
#include "models/transformer/rope.h"

namespace ltx::models::transformer {

// LTXModelType: which streams a model has (model.py).
enum class LTXModelType {
  AudioVideo,  // LTXModelConfigurator; what the pipelines use
  VideoOnly,   // LTXVideoOnlyModelConfigurator
  AudioOnly,   // LTXAudioOnlyModelConfigurator
};
const char* model_type_name(LTXModelType type);
inline bool is_video_enabled(LTXModelType t) { return t != LTXModelType::AudioOnly; }
inline bool is_audio_enabled(LTXModelType t) { return t != LTXModelType::VideoOnly; }

// The LTXModel constructor arguments as the configurator for `model_type` fills them. Fields a
// configurator does not pass keep the LTXModel code default (e.g. the audio-only configurator
// ignores use_prompt_adaln_single, audio_ff_bias and positional_embedding_theta, as the reference).
struct LTXModelConfig {
  LTXModelType model_type = LTXModelType::AudioVideo;
  std::string source;  // where it was read from (for messages)

  // video stream
  int64_t num_attention_heads = 32;
  int64_t attention_head_dim = 128;
  int64_t in_channels = 128;
  int64_t out_channels = 128;
  int64_t cross_attention_dim = 4096;
  std::vector<double> positional_embedding_max_pos = {20, 2048, 2048};
  // audio stream
  int64_t audio_num_attention_heads = 32;
  int64_t audio_attention_head_dim = 64;
  int64_t audio_in_channels = 128;
  int64_t audio_out_channels = 128;
  int64_t audio_cross_attention_dim = 2048;
  std::vector<double> audio_positional_embedding_max_pos = {20};
  // shared
  int64_t num_layers = 48;
  double norm_eps = 1e-6;
  double positional_embedding_theta = 10000.0;
  double timestep_scale_multiplier = 1000;
  double av_ca_timestep_scale_multiplier = 1;  // code default 1; the published files say 1000.0
  bool use_middle_indices_grid = true;
  LTXRopeType rope_type = LTXRopeType::Split;
  bool double_precision_rope = false;  // frequencies_precision == "float64"
  bool apply_gated_attention = false;
  bool cross_attention_adaln = false;
  bool use_prompt_adaln_single = true;
  bool ff_bias = true;
  bool audio_ff_bias = true;
  bool use_keyframes_abs_pos_embedding = false;
  // 19B (no caption_proj_before_connector): PixArtAlphaTextProjection(caption_channels -> inner)
  // inside the transformer, for each enabled stream of the AV / video-only / audio-only model.
  bool caption_projection = false;
  int64_t caption_channels = 0;

  int64_t inner_dim() const { return num_attention_heads * attention_head_dim; }
  int64_t audio_inner_dim() const { return audio_num_attention_heads * audio_attention_head_dim; }

  // `metadata` is the decoded __metadata__ object (io::SafetensorsFile::metadata_json()): its
  // "config" entry (an object, or a JSON string) must hold a "transformer" object. `source` names
  // the file in error messages.
  static LTXModelConfig from_metadata(const nlohmann::json& metadata, LTXModelType type,
                                      const std::string& source);
  static LTXModelConfig from_file(const io::SafetensorsFile& file, LTXModelType type);
};

// rope_type ("split" default, "interleaved") and frequencies_precision ("float64" -> true; absent,
// "float32" or false -> false) of a config.transformer section, shared with the text connectors.
LTXRopeType rope_type_from_config(const ConfigReader& r);
bool double_precision_rope_from_config(const ConfigReader& r);

}  // namespace ltx::models::transformer
