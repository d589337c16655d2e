#pragma once
// The feature extractors (reference: text_encoders/gemma/feature_extractor.py): every Gemma hidden
// state (the embedding output and each decoder layer, L = num_hidden_layers + 1 of them, width D)
// normalised, flattened with the layer index innermost (feature d * L + l) and projected by the
// text projection (`text_embedding_projection.*` in the checkpoints).
//
//   V1 (LTX-2, 19B): per batch item and layer, over the valid tokens: x' = 8 (x - mean) /
//     (max - min + 1e-6), mean = sum / (n D + 1e-6); aggregate_embed (D L -> D, no bias); the
//     same features feed the video and the audio connector.
//   V2 (LTX-2.3 / 2.5): per token and layer x' = x rsqrt(mean_d(x^2) + 1e-6);
//     video = video_aggregate_embed(x' sqrt(Wv / D)), audio = audio_aggregate_embed(x' sqrt(Wa / D))
//     (both with bias).
// Pad tokens are zeroed before the projection (a V2 pad row is therefore the bias). The
// statistics and projections only touch the valid tokens, which is what makes this cheap: a
// prompt is ~100 of 1024 tokens.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/weights.h"
#include "models/config_json.h"
#include "nn/linear.h"

namespace ltx::models::text {

// The two Gemma text-config numbers the feature extractor needs (text_config.hidden_size and
// text_config.num_hidden_layers).
struct GemmaTextDims {
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
};

enum class FeatureExtractorVersion { V1, V2 };
const char* feature_extractor_version_name(FeatureExtractorVersion v);

struct FeatureExtractorConfig {
  FeatureExtractorVersion version = FeatureExtractorVersion::V1;
  int64_t embedding_dim = 0;  // Gemma hidden size D
  int64_t num_layers = 0;     // hidden states per token: num_hidden_layers + 1
  int64_t video_dim = 0;      // V1: D; V2: num_attention_heads * attention_head_dim
  // V1: D (the video features); V2: audio heads * head dim; 0: no audio features (video-only
  // checkpoints: V1 with is_av false, V2 without audio_aggregate_embed).
  int64_t audio_dim = 0;

  int64_t flat_dim() const { return embedding_dim * num_layers; }

  // _create_feature_extractor: V1 when none of caption_proj_before_connector,
  // caption_projection_first_linear, caption_proj_input_norm, caption_projection_second_linear is
  // in config.transformer; V2 when all four are, with the values true, false, false, false; any
  // other combination is an error (the reference's NotImplementedError). V2 reads
  // num_attention_heads, attention_head_dim, audio_num_attention_heads, audio_attention_head_dim
  // (required; without `audio`, the audio keys are not read and audio_dim is 0).
  static FeatureExtractorConfig from_config(const ConfigReader& r, const GemmaTextDims& gemma,
                                            bool audio = true);
};

struct TextFeatures {
  Tensor video;  // [B, T, video_dim]
  Tensor audio;  // [B, T, audio_dim] (V1: the same tensor as video); undefined when audio_dim is 0
};

class FeatureExtractor {
 public:
  // Binds `aggregate_embed.weight` (V1) or `{video,audio}_aggregate_embed.{weight,bias}` (V2) from
  // `w` (a view scoped at "feature_extractor.").
  static FeatureExtractor load(io::WeightMap& w, const FeatureExtractorConfig& config,
                               const nn::LoadOptions& opt = {});

  const FeatureExtractorConfig& config() const { return config_; }

  // hidden_states: L tensors [B, T, D] (the Gemma tuple), or one [B, T, D, L] tensor (the tuple
  // stacked on the last dim); attention_mask [B, T], 1 = token, 0 = pad (either side).
  TextFeatures operator()(const std::vector<Tensor>& hidden_states, const Tensor& attention_mask) const;
  TextFeatures operator()(const Tensor& stacked_hidden_states, const Tensor& attention_mask) const;

 private:
  FeatureExtractorConfig config_;
  std::optional<nn::Linear> aggregate_embed_;  // V1
  std::optional<nn::Linear> video_aggregate_embed_, audio_aggregate_embed_;  // V2
};

// The normalisations on the valid tokens of one batch item, x [n, D, L] -> [n, D * L] (exposed for
// tests). V1: _norm_and_concat_padded_batch; V2: norm_and_concat_per_token_rms.
Tensor norm_and_concat_v1(const Tensor& x);
Tensor norm_and_concat_v2(const Tensor& x);

}  // namespace ltx::models::text
