#pragma once
// Duration-head configuration and key filter (reference: ltx_core/duration_head/
// model_configurator.py).
//
// The head's tensors live under `duration_head.` (its own file, or a checkpoint that bundles it).
// Its input widths come from `config.transformer.{cross_attention_dim, audio_cross_attention_dim}`
// and its own sizes from `config.duration_head.{pooler_hidden_dim, num_queries, num_pooler_heads,
// mlp_hidden}`; absent keys (or an absent section) take the reference's defaults
// 4096 / 2048 / 256 / 1 / 4 / 256.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "io/safetensors.h"
#include "io/weights.h"

namespace ltx::models::duration_head {

struct DurationHeadConfig {
  int64_t video_cross_attention_dim = 4096;
  int64_t audio_cross_attention_dim = 2048;
  int64_t pooler_hidden_dim = 256;
  int64_t num_queries = 1;
  int64_t num_pooler_heads = 4;
  int64_t mlp_hidden = 256;
};

// From a file's decoded metadata; `where` names the file in errors (wrong types, a pooler width
// that the head count does not divide).
DurationHeadConfig duration_head_config_from_metadata(const nlohmann::json& metadata,
                                                      const std::string& where);

// DURATION_HEAD_KEY_OPS: keeps `duration_head.*` and strips the prefix.
io::KeyMap duration_head_key_map();

// Whether `file` holds duration-head weights (any `duration_head.*` tensor): the reference treats
// a checkpoint without them (every pre-2.5 file) as having no head.
bool has_duration_head(const io::SafetensorsFile& file);

}  // namespace ltx::models::duration_head
