#include "models/text/embeddings_processor.h"

#include <set>

#include "core/error.h"
#include "models/text/token_mask.h"
#include "ops/elementwise.h"

namespace ltx::models::text {

using json = nlohmann::json;

namespace {

// The connector keys of config.transformer the reference reads, and those the published files
// carry without anyone reading them (the register count is hard-coded to 128, the output norm
// always applied). The transformer's config accepts every connector_* key and leaves them here.
const std::set<std::string>& known_connector_keys() {
  static const std::set<std::string> kKeys = {
      "connector_num_attention_heads", "connector_attention_head_dim", "connector_num_layers",
      "connector_positional_embedding_max_pos", "connector_apply_gated_attention", "connector_ff_bias",
      "audio_connector_num_attention_heads", "audio_connector_attention_head_dim",
      "audio_connector_num_layers",
      // read by nobody
      "connector_num_learnable_registers", "connector_norm_output", "connector_learnable_registers_std"};
  return kKeys;
}

}  // namespace

EmbeddingsProcessorConfig EmbeddingsProcessorConfig::from_metadata(const json& metadata,
                                                                   const GemmaTextDims& gemma,
                                                                   const std::string& source,
                                                                   bool audio) {
  const json t = transformer_config_section(metadata, source);
  const ConfigReader r(t, source);
  for (const auto& [key, value] : t.items())
    if ((key.starts_with("connector_") || key.starts_with("audio_connector_")) &&
        known_connector_keys().count(key) == 0)
      r.error(key, str("is not a connector key this code knows (value ", value.dump(),
                       "); the checkpoint may be newer than this build"));
  // Type checks of the keys nobody reads, so that a damaged file does not pass silently.
  (void)r.integer("connector_num_learnable_registers", 128);
  (void)r.boolean("connector_norm_output", true);
  (void)r.number("connector_learnable_registers_std", 1.0);

  EmbeddingsProcessorConfig c;
  c.source = source;
  c.audio = audio;
  c.video_connector = Embeddings1DConnectorConfig::video_from_config(r);
  c.audio_connector = Embeddings1DConnectorConfig::audio_from_config(r);
  c.feature_extractor = FeatureExtractorConfig::from_config(r, gemma, audio);

  // The features feed the connectors: their widths must agree (the reference would fail with a
  // shape error at the first prompt).
  const FeatureExtractorConfig& f = c.feature_extractor;
  const bool v1 = f.version == FeatureExtractorVersion::V1;
  if (f.video_dim != c.video_connector.inner_dim())
    r.error("connector_num_attention_heads",
            str("* connector_attention_head_dim = ", c.video_connector.inner_dim(),
                " (the video connector width) differs from the video text features' width ", f.video_dim,
                v1 ? " (the Gemma hidden size, V1 feature extractor)"
                   : " (num_attention_heads * attention_head_dim, V2 feature extractor)"));
  if (audio && f.audio_dim != c.audio_connector.inner_dim())
    r.error(r.has("audio_connector_num_attention_heads") ? "audio_connector_num_attention_heads"
                                                         : "connector_num_attention_heads",
            str("gives an audio connector width of ", c.audio_connector.inner_dim(),
                ", which differs from the audio text features' width ", f.audio_dim,
                v1 ? " (the Gemma hidden size, V1 feature extractor)"
                   : " (audio_num_attention_heads * audio_attention_head_dim, V2 feature extractor)"));
  return c;
}

EmbeddingsProcessorConfig EmbeddingsProcessorConfig::from_file(const io::SafetensorsFile& file,
                                                               const GemmaTextDims& gemma, bool audio) {
  return from_metadata(file.metadata_json(), gemma, file.path(), audio);
}

io::KeyMap embeddings_processor_key_map(bool audio) {
  if (!audio) {
    io::KeyMap k("VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_OPS");
    for (const char* p : {"aggregate_embed.", "video_aggregate_embed."}) {
      const std::string from = str("text_embedding_projection.", p);
      k.keep(from).replace(from, str("feature_extractor.", p));
    }
    const std::string from = "model.diffusion_model.embeddings_connector.";
    k.keep(from).replace(from, "video_connector.");
    return k;
  }
  io::KeyMap k("EMBEDDINGS_PROCESSOR_KEY_OPS");
  for (const char* p : {"aggregate_embed.", "video_aggregate_embed.", "audio_aggregate_embed."}) {
    const std::string from = str("text_embedding_projection.", p);
    k.keep(from).replace(from, str("feature_extractor.", p));
  }
  for (const char* s : {"video", "audio"}) {
    const std::string from = str("model.diffusion_model.", s, "_embeddings_connector.");
    k.keep(from).replace(from, str(s, "_connector."));
  }
  return k;
}

bool embeddings_have_audio(const std::vector<std::string>& paths) {
  std::vector<std::string> keys;
  for (const std::string& p : paths) {
    const std::vector<std::string> k = io::checkpoint_keys(p);
    keys.insert(keys.end(), k.begin(), k.end());
  }
  const auto any_key = [&](const std::string& prefix) {
    for (const std::string& n : keys)
      if (n.starts_with(prefix)) return true;
    return false;
  };
  return any_key("model.diffusion_model.audio_embeddings_connector.") ||
         !any_key("model.diffusion_model.embeddings_connector.");
}

bool embeddings_have_audio(const std::vector<std::shared_ptr<const io::SafetensorsFile>>& files) {
  const auto any_key = [&](const std::string& prefix) {
    for (const auto& f : files)
      for (const std::string& n : f->names())
        if (n.starts_with(prefix)) return true;
    return false;
  };
  return any_key("model.diffusion_model.audio_embeddings_connector.") ||
         !any_key("model.diffusion_model.embeddings_connector.");
}

EmbeddingsProcessor EmbeddingsProcessor::load(io::WeightMap& w, const EmbeddingsProcessorConfig& config,
                                              const nn::LoadOptions& opt) {
  EmbeddingsProcessor p;
  p.config_ = config;
  io::WeightMap fe = w.scoped("feature_extractor."), vc = w.scoped("video_connector.");
  p.feature_extractor_ = FeatureExtractor::load(fe, config.feature_extractor, opt);
  p.video_connector_ = Embeddings1DConnector::load(vc, config.video_connector, opt);
  if (config.audio) {
    io::WeightMap ac = w.scoped("audio_connector.");
    p.audio_connector_ = Embeddings1DConnector::load(ac, config.audio_connector, opt);
  }
  w.finish(str("text embeddings processor (feature extractor ",
               feature_extractor_version_name(config.feature_extractor.version),
               config.audio ? " + video/audio connectors" : " + video connector, video-only",
               config.source.empty() ? std::string() : str(", config from ", config.source), ")"));
  return p;
}

EmbeddingsProcessor EmbeddingsProcessor::from_files(const std::vector<std::string>& paths,
                                                    const GemmaTextDims& gemma, const nn::LoadOptions& opt) {
  LTX_CHECK(!paths.empty(), "text embeddings processor: no checkpoint given (pass the LTX checkpoint, "
            "or the transformer and text-encoder files of a split pack)");
  // Safetensors or GGUF files (a GGUF transformer file: config as a string value, bare names).
  const bool audio = embeddings_have_audio(paths);
  const EmbeddingsProcessorConfig config = EmbeddingsProcessorConfig::from_metadata(
      io::checkpoint_metadata_json(paths[0]), gemma, paths[0], audio);
  io::WeightMap w = io::WeightMap::open_checkpoints(paths, embeddings_processor_key_map(audio));
  return load(w, config, opt);
}

const Embeddings1DConnector& EmbeddingsProcessor::audio_connector() const {
  LTX_CHECK(audio_connector_.has_value(), "text embeddings processor",
            config_.source.empty() ? std::string() : str(" of ", config_.source),
            ": video-only checkpoint, there is no audio connector");
  return *audio_connector_;
}

TextFeatures EmbeddingsProcessor::features(const std::vector<Tensor>& hidden_states,
                                           const Tensor& attention_mask) const {
  return feature_extractor_(hidden_states, attention_mask);
}

TextFeatures EmbeddingsProcessor::features(const Tensor& stacked, const Tensor& attention_mask) const {
  return feature_extractor_(stacked, attention_mask);
}

EmbeddingsProcessorOutput EmbeddingsProcessor::create_embeddings(const Tensor& video_features,
                                                                 const Tensor& audio_features,
                                                                 const Tensor& additive_mask) const {
  LTX_CHECK(video_features.defined(), "text embeddings processor: no video features");
  LTX_CHECK(audio_features.defined() == has_audio(), "text embeddings processor: ",
            has_audio() ? "the audio connector is configured but no audio features were given"
                        : "audio features were given, but this video-only checkpoint has no audio "
                          "connector");
  const TokenMask mask = TokenMask::from_additive(additive_mask);
  for (const Tensor* f : {&video_features, &audio_features})
    LTX_CHECK(!f->defined() ||
                  (f->dim() == 3 && f->size(0) == mask.batch() && f->size(1) == mask.length()),
              "text embeddings processor: features must be [", mask.batch(), ", ", mask.length(),
              ", W] like the mask, got ", f->describe());
  // Connectors expect the tokens first: one stable permutation for both streams.
  const TokenMask sorted = mask.valid_first();
  const Tensor sorted_additive = sorted.additive(video_features.device()).to(video_features.dtype());
  const ConnectorOutput video =
      video_connector_(reorder_valid_first(video_features, mask), sorted_additive);

  // _to_binary_mask: (mask < 1e-6), i.e. 1 for 0 (registers, tokens) and for -max alike: all ones
  // in every configuration. Kept as the reference computes it.
  const std::vector<double> m = video.additive_mask.to_double_vector();
  std::vector<int64_t> binary(m.size());
  bool all_ones = true;
  for (size_t i = 0; i < m.size(); ++i) {
    binary[i] = m[i] < 0.000001 ? 1 : 0;
    all_ones = all_ones && binary[i] == 1;
  }
  const int64_t b = mask.batch(), s = mask.length();
  EmbeddingsProcessorOutput out;
  out.attention_mask = Tensor::from_vector(binary, {b, s}).to(video.hidden_states.device());
  out.video_encoding = all_ones ? video.hidden_states
                                : ops::mul(video.hidden_states,
                                           out.attention_mask.to(video.hidden_states.dtype()).unsqueeze(-1));
  if (audio_connector_)
    out.audio_encoding =
        (*audio_connector_)(reorder_valid_first(audio_features, mask), sorted_additive).hidden_states;
  return out;
}

EmbeddingsProcessorOutput EmbeddingsProcessor::process_hidden_states(
    const std::vector<Tensor>& hidden_states, const Tensor& attention_mask) const {
  const TextFeatures f = features(hidden_states, attention_mask);
  const Tensor additive = TokenMask::from_binary(attention_mask).additive(f.video.device());
  return create_embeddings(f.video, f.audio, additive.to(f.video.dtype()));
}

EmbeddingsProcessorOutput EmbeddingsProcessor::process_hidden_states(const Tensor& stacked,
                                                                     const Tensor& attention_mask) const {
  const TextFeatures f = features(stacked, attention_mask);
  const Tensor additive = TokenMask::from_binary(attention_mask).additive(f.video.device());
  return create_embeddings(f.video, f.audio, additive.to(f.video.dtype()));
}

}  // namespace ltx::models::text
