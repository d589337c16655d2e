#pragma once
// EmbeddingsProcessor (reference: text_encoders/gemma/embeddings_processor.py and
// encoders/encoder_configurator.py): Gemma hidden states -> the diffusion transformer's video and
// audio contexts.
//
//   features = feature_extractor(hidden_states, mask)          (V1 / V2, at the token positions)
//   the tokens are moved to the front (a stable valid-first reordering: left padding becomes
//   right padding), the same permutation for video and audio
//   video = video_connector(features.video, additive mask);  audio = audio_connector(...)
//   mask  = all ones (the registers replaced the pads)
//
//   auto p = EmbeddingsProcessor::from_files({"ltx-2.3.safetensors"}, gemma_dims);
//   auto p = EmbeddingsProcessor::from_files({"transformer.safetensors", "te.safetensors"}, dims);
//   EmbeddingsProcessorOutput ctx = p.process_hidden_states(gemma_hidden_states, attention_mask);
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/weights.h"
#include "models/text/embeddings_connector.h"
#include "models/text/feature_extractor.h"

namespace ltx::models::text {

struct EmbeddingsProcessorConfig {
  FeatureExtractorConfig feature_extractor;
  Embeddings1DConnectorConfig video_connector, audio_connector;
  std::string source;

  // EmbeddingsProcessorConfigurator.from_metadata on the LTX checkpoint's decoded __metadata__
  // (config.transformer): the connector_* keys (unknown connector_* keys are errors, as is a
  // feature width that does not match its connector), the V1 / V2 selection, and the Gemma text
  // dims. `source` names the file in errors.
  static EmbeddingsProcessorConfig from_metadata(const nlohmann::json& metadata,
                                                 const GemmaTextDims& gemma, const std::string& source);
  static EmbeddingsProcessorConfig from_file(const io::SafetensorsFile& file, const GemmaTextDims& gemma);
};

struct EmbeddingsProcessorOutput {
  Tensor video_encoding;  // [B, T, video connector width]
  Tensor audio_encoding;  // [B, T, audio connector width]
  Tensor attention_mask;  // [B, T] I64: all ones
};

// EMBEDDINGS_PROCESSOR_KEY_OPS: keeps text_embedding_projection.{aggregate_embed,
// video_aggregate_embed, audio_aggregate_embed}.* (-> feature_extractor.*) and
// model.diffusion_model.{video,audio}_embeddings_connector.* (-> {video,audio}_connector.*).
io::KeyMap embeddings_processor_key_map();

class EmbeddingsProcessor {
 public:
  // Binds feature_extractor.*, video_connector.*, audio_connector.* from `w` (names after the key
  // map) and reports every missing, misshaped and unexpected name in one error.
  static EmbeddingsProcessor load(io::WeightMap& w, const EmbeddingsProcessorConfig& config,
                                  const nn::LoadOptions& opt = {});
  // The reference's embeddings_weight_paths: the LTX checkpoint (monolith), or (transformer file,
  // text-encoder file) for split 2.5 packs. The config comes from the first file; the tensors of
  // all files are merged (a later file wins a name both have).
  static EmbeddingsProcessor from_files(const std::vector<std::string>& paths, const GemmaTextDims& gemma,
                                        const nn::LoadOptions& opt = {});

  const EmbeddingsProcessorConfig& config() const { return config_; }
  const FeatureExtractor& feature_extractor() const { return feature_extractor_; }
  const Embeddings1DConnector& video_connector() const { return video_connector_; }
  const Embeddings1DConnector& audio_connector() const { return audio_connector_; }

  // The feature extractor alone (at the token positions).
  TextFeatures features(const std::vector<Tensor>& hidden_states, const Tensor& attention_mask) const;
  TextFeatures features(const Tensor& stacked_hidden_states, const Tensor& attention_mask) const;

  // create_embeddings: features [B, T, W] and an additive mask [B, 1, 1, T] (>= 0 token, < 0 pad).
  EmbeddingsProcessorOutput create_embeddings(const Tensor& video_features, const Tensor& audio_features,
                                              const Tensor& additive_mask) const;

  // process_hidden_states: hidden states as in FeatureExtractor (L tensors [B, T, D] or one
  // [B, T, D, L]), attention_mask [B, T] (1 = token; left or right padding).
  EmbeddingsProcessorOutput process_hidden_states(const std::vector<Tensor>& hidden_states,
                                                  const Tensor& attention_mask) const;
  EmbeddingsProcessorOutput process_hidden_states(const Tensor& stacked_hidden_states,
                                                  const Tensor& attention_mask) const;

 private:
  EmbeddingsProcessorConfig config_;
  FeatureExtractor feature_extractor_;
  Embeddings1DConnector video_connector_, audio_connector_;
};

}  // namespace ltx::models::text
