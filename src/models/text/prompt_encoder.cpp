#include "models/text/prompt_encoder.h"

#include <algorithm>
#include <optional>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/text/embeddings_processor.h"
#include "models/text/gemma/compat.h"
#include "models/text/gemma/model.h"
#include "models/text/gemma_assets.h"

namespace ltx::text {

namespace mt = models::text;

namespace {

// Whether a checkpoint file (safetensors or GGUF) holds a tensor under `prefix`.
bool holds_prefix(const std::string& path, const std::string& prefix) {
  const std::vector<std::string> names = io::checkpoint_keys(path);
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
}

}  // namespace

struct PromptEncoder::State {
  std::string te_path;
  std::vector<std::string> embeddings;
  PromptEncoderOptions options;
  GemmaAssets assets;
  GemmaTextConfig config;
  std::optional<GemmaPromptTokenizer> tokenizer;
  std::optional<mt::EmbeddingsProcessorConfig> processor_config;
  std::vector<std::string> warnings;
  std::optional<GemmaTextModel> gemma;
  std::optional<mt::EmbeddingsProcessor> processor;
  PromptEncoderWeights weights;  // set: the models come from these maps, not the files
};

PromptEncoder::PromptEncoder(const std::string& text_encoder, std::vector<std::string> embeddings,
                             PromptEncoderOptions options)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.te_path = text_encoder;
  s.options = options;
  s.assets = GemmaAssets::load(text_encoder);
  s.assets.require_encoder_assets();
  s.config = GemmaTextConfig::from_json(s.assets.config, text_encoder);
  s.tokenizer.emplace(build_gemma_hf_tokenizer(s.assets), options.max_length);

  if (embeddings.empty()) return;
  // ModelPaths.from_split passes (transformer, text encoder): the projection lives in the TE.
  // Safetensors or GGUF files (a GGUF transformer first: the config is its string metadata).
  bool has_projection = false;
  for (const std::string& p : embeddings)
    has_projection = has_projection || holds_prefix(p, "text_embedding_projection.");
  if (!has_projection && is_safetensors_file(text_encoder) &&
      std::find(embeddings.begin(), embeddings.end(), text_encoder) == embeddings.end())
    embeddings.push_back(text_encoder);
  s.embeddings = std::move(embeddings);

  const nlohmann::json meta = io::checkpoint_metadata_json(s.embeddings.front());
  s.warnings = check_gemma_version(meta, s.embeddings.front(), s.config, text_encoder).warnings;
  s.processor_config = mt::EmbeddingsProcessorConfig::from_metadata(
      meta, mt::GemmaTextDims{s.config.hidden_size, s.config.num_layers}, s.embeddings.front(),
      mt::embeddings_have_audio(s.embeddings));
}

PromptEncoder::PromptEncoder(GemmaAssets assets, const mt::EmbeddingsProcessorConfig& processor,
                             PromptEncoderWeights weights, PromptEncoderOptions options)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  LTX_CHECK(weights.text_encoder && weights.embeddings_processor, "prompt encoder (", assets.source,
            "): both weight sources (text encoder, embeddings processor) must be given");
  s.te_path = assets.source;
  s.options = options;
  s.assets = std::move(assets);
  s.config = GemmaTextConfig::from_json(s.assets.config, s.assets.source);
  s.tokenizer.emplace(build_gemma_hf_tokenizer(s.assets), options.max_length);
  s.processor_config = processor;
  s.weights = std::move(weights);
}

PromptEncoder::~PromptEncoder() = default;
PromptEncoder::PromptEncoder(PromptEncoder&&) noexcept = default;
PromptEncoder& PromptEncoder::operator=(PromptEncoder&&) noexcept = default;

TokenizedBatch PromptEncoder::tokenize(const std::vector<std::string>& prompts) const {
  return s_->tokenizer->tokenize(prompts);
}

const GemmaTextModel& PromptEncoder::text_encoder() { return load_text_encoder(s_->options.streaming); }

const GemmaTextModel& PromptEncoder::load_text_encoder(const models::BlockStreaming& streaming) {
  State& s = *s_;
  if (!s.gemma && s.weights.text_encoder) {
    io::WeightMap w = s.weights.text_encoder();
    s.gemma.emplace(
        GemmaTextModel::load(s.config, w, s.options.load, "in memory", s.te_path, streaming));
  }
  if (!s.gemma) s.gemma.emplace(GemmaTextModel::load(s.assets, s.options.load, streaming));
  return *s_->gemma;
}

const mt::EmbeddingsProcessor& PromptEncoder::embeddings_processor() {
  State& s = *s_;
  LTX_CHECK(s.processor_config.has_value(), "prompt encoder (text encoder ", s.te_path,
            "): no LTX checkpoint was given, so there is no feature extractor or connector to "
            "turn hidden states into contexts; pass the checkpoint (and for split packs the "
            "text-encoder or text-projection file)");
  if (!s.processor && s.weights.embeddings_processor) {
    io::WeightMap w = s.weights.embeddings_processor();
    s.processor.emplace(mt::EmbeddingsProcessor::load(w, *s.processor_config, s.options.load));
  }
  if (!s.processor) {
    io::WeightMap w = io::WeightMap::open_checkpoints(
        s.embeddings, mt::embeddings_processor_key_map(s.processor_config->audio));
    s.processor.emplace(mt::EmbeddingsProcessor::load(w, *s.processor_config, s.options.load));
  }
  return *s.processor;
}

std::string PromptEncoder::enhance(const std::string& prompt, const EnhanceOptions& options) {
  (void)default_enhance_generation(s_->config);  // refuses gemma4_unified before loading
  if (options.image.defined()) {
    // The vision tower loads for this call only (encoding never uses it).
    const GemmaVisionConfig vision_config = image_enhancement_vision_config(s_->assets);
    (void)image_processor_config_of(s_->assets);
    const GemmaVisionTower vision =
        GemmaVisionTower::load(vision_config, s_->assets.weight_paths, s_->options.load);
    return PromptEnhancer(s_->assets, text_encoder())
        .enhance_i2v(prompt, options.image, vision, options)
        .text;
  }
  return PromptEnhancer(s_->assets, text_encoder()).enhance_t2v(prompt, options).text;
}

void PromptEncoder::release_text_encoder() { s_->gemma.reset(); }
void PromptEncoder::release_embeddings_processor() { s_->processor.reset(); }
bool PromptEncoder::text_encoder_loaded() const { return s_->gemma.has_value(); }
bool PromptEncoder::embeddings_processor_loaded() const { return s_->processor.has_value(); }

std::vector<Tensor> PromptEncoder::hidden_states(const Tensor& input_ids,
                                                 const Tensor& attention_mask) {
  return text_encoder().encode(input_ids, attention_mask);
}

PromptContext PromptEncoder::contexts(const std::vector<Tensor>& hidden_states,
                                      const Tensor& attention_mask, int64_t index) {
  LTX_CHECK(!hidden_states.empty() && attention_mask.dim() == 2 && index >= 0 &&
                index < attention_mask.size(0),
            "prompt encoder: contexts of batch item ", index, " need hidden states and a [B, T] "
            "mask with B > ", index, ", got ", hidden_states.size(), " hidden states and mask ",
            attention_mask.describe());
  const mt::EmbeddingsProcessor& proc = embeddings_processor();
  std::vector<Tensor> item;
  item.reserve(hidden_states.size());
  for (const Tensor& h : hidden_states) item.push_back(h.narrow(0, index, 1));
  const Tensor mask = attention_mask.narrow(0, index, 1).to(item.front().device());
  const mt::EmbeddingsProcessorOutput o = proc.process_hidden_states(item, mask);
  return PromptContext{o.video_encoding, o.audio_encoding, o.attention_mask};
}

std::vector<PromptContext> PromptEncoder::encode(const std::vector<std::string>& prompts) {
  if (prompts.empty()) return {};
  // Fail before the expensive forward when there is nothing to turn hidden states into.
  LTX_CHECK(s_->processor_config.has_value(), "prompt encoder (text encoder ", s_->te_path,
            "): encode() needs the LTX checkpoint (feature extractor and connectors)");
  const TokenizedBatch batch = tokenize(prompts);
  const Tensor mask = batch.attention_mask_tensor();
  // Gemma loaded for this one forward (freed right after it): its streamed layers are read from
  // where they were bound through the staging buffers, one pass over their bytes; page-locking
  // them first would cost that same pass plus the pinning, for a single use. Same bits.
  models::BlockStreaming once = s_->options.streaming;
  if (!s_->options.keep_loaded && once.enabled()) once.from_file = true;
  const std::vector<Tensor> hidden =
      load_text_encoder(once).encode(batch.input_ids_tensor(), mask);
  if (!s_->options.keep_loaded) release_text_encoder();
  std::vector<PromptContext> out;
  out.reserve(prompts.size());
  for (int64_t i = 0; i < batch.batch; ++i) out.push_back(contexts(hidden, mask, i));
  if (!s_->options.keep_loaded) release_embeddings_processor();
  return out;
}

bool PromptEncoder::has_audio() const {
  return s_->processor_config.has_value() && s_->processor_config->audio;
}
const GemmaAssets& PromptEncoder::assets() const { return s_->assets; }
const GemmaTextConfig& PromptEncoder::gemma_config() const { return s_->config; }
const std::string& PromptEncoder::text_encoder_path() const { return s_->te_path; }
const std::vector<std::string>& PromptEncoder::embeddings_paths() const { return s_->embeddings; }
const std::vector<std::string>& PromptEncoder::warnings() const { return s_->warnings; }

}  // namespace ltx::text
