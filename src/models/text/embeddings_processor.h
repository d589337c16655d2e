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
// Video-only checkpoints (no audio connector; the video connector stored as
// model.diffusion_model.embeddings_connector.*, as VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_OPS reads
// it) have no audio projection, connector or context.
//
//   auto p = EmbeddingsProcessor::from_files({"ltx-2.3.safetensors"}, gemma_dims);
//   auto p = EmbeddingsProcessor::from_files({"transformer.safetensors", "te.safetensors"}, dims);
//   EmbeddingsProcessorOutput ctx = p.process_hidden_states(gemma_hidden_states, attention_mask);
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "io/weights.h"
#include "models/text/embeddings_connector.h"
#include "models/text/feature_extractor.h"

namespace ltx::models::text {

struct EmbeddingsProcessorConfig {
  FeatureExtractorConfig feature_extractor;
  Embeddings1DConnectorConfig video_connector, audio_connector;  // audio: unused without `audio`
  bool audio = true;  // false: a video-only checkpoint
  std::string source;

  // EmbeddingsProcessorConfigurator.from_metadata on the LTX checkpoint's decoded __metadata__
  // (config.transformer): the connector_* keys (unknown connector_* keys are errors, as is a
  // feature width that does not match its connector), the V1 / V2 selection, and the Gemma text
  // dims. `source` names the file in errors. Without `audio` (a video-only checkpoint) the audio
  // connector and projection are neither configured nor checked.
  static EmbeddingsProcessorConfig from_metadata(const nlohmann::json& metadata,
                                                 const GemmaTextDims& gemma, const std::string& source,
                                                 bool audio = true);
  static EmbeddingsProcessorConfig from_file(const io::SafetensorsFile& file, const GemmaTextDims& gemma,
                                             bool audio = true);
};

struct EmbeddingsProcessorOutput {
  Tensor video_encoding;  // [B, T, video connector width]
  Tensor audio_encoding;  // [B, T, audio connector width]; undefined for video-only checkpoints
  Tensor attention_mask;  // [B, T] I64: all ones
};

// EMBEDDINGS_PROCESSOR_KEY_OPS: keeps text_embedding_projection.{aggregate_embed,
// video_aggregate_embed, audio_aggregate_embed}.* (-> feature_extractor.*) and
// model.diffusion_model.{video,audio}_embeddings_connector.* (-> {video,audio}_connector.*).
// With audio false, VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_OPS: text_embedding_projection.
// {aggregate_embed, video_aggregate_embed}.* (-> feature_extractor.*) and
// model.diffusion_model.embeddings_connector.* (-> video_connector.*; the reference's map targets
// a module holding the processor at `embeddings_processor.`).
io::KeyMap embeddings_processor_key_map(bool audio = true);

// Whether checkpoint files (the embeddings_weight_paths, opened) describe an audio-video
// processor: false only when none holds an audio connector
// (model.diffusion_model.audio_embeddings_connector.*) and one holds the video-only connector
// (model.diffusion_model.embeddings_connector.*).
bool embeddings_have_audio(const std::vector<std::shared_ptr<const io::SafetensorsFile>>& files);
// The same from the files' paths, safetensors or GGUF (io::checkpoint_keys).
bool embeddings_have_audio(const std::vector<std::string>& paths);

class EmbeddingsProcessor {
 public:
  // Binds feature_extractor.*, video_connector.*, audio_connector.* from `w` (names after the key
  // map) and reports every missing, misshaped and unexpected name in one error.
  static EmbeddingsProcessor load(io::WeightMap& w, const EmbeddingsProcessorConfig& config,
                                  const nn::LoadOptions& opt = {});
  // The reference's embeddings_weight_paths: the LTX checkpoint (monolith), or (transformer file,
  // text-encoder file) for split 2.5 packs. The config comes from the first file; the tensors of
  // all files are merged (a later file wins a name both have). The layout (audio-video or
  // video-only) comes from embeddings_have_audio.
  static EmbeddingsProcessor from_files(const std::vector<std::string>& paths, const GemmaTextDims& gemma,
                                        const nn::LoadOptions& opt = {});

  const EmbeddingsProcessorConfig& config() const { return config_; }
  const FeatureExtractor& feature_extractor() const { return feature_extractor_; }
  const Embeddings1DConnector& video_connector() const { return video_connector_; }
  bool has_audio() const { return audio_connector_.has_value(); }
  // Throws for a video-only processor.
  const Embeddings1DConnector& audio_connector() const;

  // The feature extractor alone (at the token positions).
  TextFeatures features(const std::vector<Tensor>& hidden_states, const Tensor& attention_mask) const;
  TextFeatures features(const Tensor& stacked_hidden_states, const Tensor& attention_mask) const;

  // create_embeddings: features [B, T, W] and an additive mask [B, 1, 1, T] (>= 0 token, < 0 pad).
  // audio_features must be undefined exactly when the processor is video-only.
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
  Embeddings1DConnector video_connector_;
  std::optional<Embeddings1DConnector> audio_connector_;
};

}  // namespace ltx::models::text
