#include "generate/model_set_writer.h"

#include <map>
#include <set>
#include <string_view>

#include "core/error.h"
#include "generate/demo_assets.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/audio_vae/audio_vae.h"
#include "models/audio_vae/config.h"
#include "models/audio_vae/vocoder.h"
#include "models/text/embeddings_processor.h"
#include "models/text/gemma/config.h"
#include "models/text/gemma/model.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/conv_video_decoder.h"
#include "models/video_vae/video_vae.h"

namespace ltx::generate {

using nlohmann::json;

namespace {

using KeyOf = std::function<std::string(const std::string& model_name)>;

// The tensors of one file, listed before any value is made: a tensor with its values (the u8
// assets) or without (made by FileTensorValues when the file is written).
class FileTensors {
 public:
  explicit FileTensors(DType floating) : floating_(floating) {}

  // Runs `load` (a component's loader) on a synthetic map whose tensors are broadcast views of
  // one zero (no memory) and lists what it takes under the file keys `key_of` gives; a key
  // already listed is kept (components that share tensors, e.g. the VAE statistics, read the
  // same ones).
  void add_component(const KeyOf& key_of, const std::function<void(io::WeightMap&)>& load) {
    io::WeightMap w = io::WeightMap::synthetic(
        [&](const std::string& name, const Shape& shape, DType dtype, Device) {
          add(key_of(name), shape, dtype_is_floating(dtype) ? floating_ : dtype);
          return Tensor::zeros(Shape(std::vector<int64_t>(shape.size(), 1)), dtype).expand(shape);
        });
    load(w);
  }
  void add(const std::string& key, const Shape& shape, DType dtype) {
    if (!keys_.insert(key).second) return;
    entries_.push_back({key, dtype, shape});
  }
  void add_bytes(const std::string& key, std::string_view bytes) {
    LTX_CHECK(keys_.insert(key).second, "model set writer: duplicate key ", key);
    entries_.push_back({key, DType::U8, Shape{static_cast<int64_t>(bytes.size())}});
    fixed_.emplace(key, Tensor::from_vector(std::vector<uint8_t>(bytes.begin(), bytes.end()),
                                            {static_cast<int64_t>(bytes.size())}));
  }
  // Moves `key`'s entry to the front (file order among tensors of one element size).
  void move_to_front(const std::string& key) {
    for (size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].name == key) {
        io::SafetensorsEntry e = entries_[i];
        entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
        entries_.insert(entries_.begin(), e);
        return;
      }
  }

  FileTensorShapes shapes_with_prefix(const std::string& prefix) const {
    FileTensorShapes out;
    for (const io::SafetensorsEntry& e : entries_)
      if (e.name.starts_with(prefix)) out.emplace_back(e.name, e.shape);
    return out;
  }

  void write(const std::string& path, const FileTensorValues& values,
             const std::map<std::string, std::string>& metadata) const {
    io::write_safetensors_streamed(
        path, entries_,
        [&](size_t i) {
          const io::SafetensorsEntry& e = entries_[i];
          if (auto it = fixed_.find(e.name); it != fixed_.end()) return it->second;
          return values(e.name, e.shape, e.dtype);
        },
        metadata);
  }

 private:
  DType floating_;
  std::set<std::string> keys_;
  std::vector<io::SafetensorsEntry> entries_;
  std::map<std::string, Tensor> fixed_;
};

KeyOf with_prefix(const std::string& prefix) {
  return [prefix](const std::string& n) { return prefix + n; };
}

// The VAE key maps move the latent statistics out of the encoder / decoder prefix.
KeyOf vae_keys(const std::string& prefix, const std::string& stats_prefix) {
  return [=](const std::string& n) {
    const std::string stats = "per_channel_statistics.";
    if (n.rfind(stats, 0) == 0) return stats_prefix + n.substr(stats.size());
    return prefix + n;
  };
}

}  // namespace

FileTensorShapes write_checkpoint_file(const std::string& path, const json& config,
                                       const std::string& model_version,
                                       const std::string& gemma_config,
                                       const FileTensorValues& values) {
  const json meta = {{"config", config}, {"model_version", model_version}};
  const nn::LoadOptions opt;
  namespace tf = models::transformer;
  namespace vv = models::video_vae;
  namespace av = models::audio_vae;

  FileTensors t(DType::BF16);  // as the published checkpoints
  const auto dit = tf::LTXModelConfig::from_metadata(meta, tf::LTXModelType::AudioVideo, path);
  t.add_component(with_prefix("model.diffusion_model."),
                  [&](io::WeightMap& w) { tf::LTXModel::load(w, dit, opt); });
  // Optional to the loader (take_optional), so not listed by it.
  if (dit.use_keyframes_abs_pos_embedding)
    t.add("model.diffusion_model.keyframes_abs_pos_embedding", {1, dit.inner_dim()}, DType::BF16);
  const FileTensorShapes transformer = t.shapes_with_prefix("model.diffusion_model.");

  const auto gemma = text::GemmaTextConfig::from_json(json::parse(gemma_config), path);
  const auto emb = models::text::EmbeddingsProcessorConfig::from_metadata(
      meta, {gemma.hidden_size, gemma.num_layers}, path);
  t.add_component(
      [](const std::string& n) {
        for (const char* s : {"video", "audio"}) {
          const std::string from = str(s, "_connector.");
          if (n.rfind(from, 0) == 0)
            return str("model.diffusion_model.", s, "_embeddings_connector.",
                       n.substr(from.size()));
        }
        const std::string fe = "feature_extractor.";
        LTX_CHECK(n.rfind(fe, 0) == 0, "model set writer: unexpected text tensor ", n);
        return "text_embedding_projection." + n.substr(fe.size());
      },
      [&](io::WeightMap& w) { models::text::EmbeddingsProcessor::load(w, emb, opt); });

  const auto enc = vv::encoder_config_from_metadata(meta, path);
  const auto dec = vv::decoder_config_from_metadata(meta, path);
  t.add_component(vae_keys("vae.encoder.", "vae.per_channel_statistics."),
                  [&](io::WeightMap& w) { vv::VideoEncoder::load(w, enc, opt); });
  t.add_component(vae_keys("vae.decoder.", "vae.per_channel_statistics."),
                  [&](io::WeightMap& w) { vv::ConvVideoDecoder::load(w, dec, opt); });

  const auto acfg = av::AudioVaeConfig::from_config(config, path);
  const auto vcfg = av::VocoderConfig::from_config(config, path);
  t.add_component(vae_keys("audio_vae.decoder.", "audio_vae.per_channel_statistics."),
                  [&](io::WeightMap& w) { av::AudioDecoder::load(w, acfg, opt); });
  // The audio encoder: retake encodes its source clip's audio track, a2vid its input audio (the
  // statistics are the decoder's, shared).
  t.add_component(vae_keys("audio_vae.encoder.", "audio_vae.per_channel_statistics."),
                  [&](io::WeightMap& w) { av::AudioEncoder::load(w, acfg, opt); });
  t.add_component(with_prefix("vocoder."),
                  [&](io::WeightMap& w) { av::VocoderModel::load(w, vcfg, opt); });

  t.write(path, values, {{"config", config.dump()}, {"model_version", model_version}});
  return transformer;
}

void write_text_encoder_file(const std::string& path, const std::string& gemma_config, DType dtype,
                             const FileTensorValues& values) {
  const auto config = text::GemmaTextConfig::from_json(json::parse(gemma_config), path);
  const std::string prefix = "language_model.model.";
  FileTensors t(dtype);
  t.add_component(with_prefix(prefix), [&](io::WeightMap& w) {
    text::GemmaTextModel::load(config, w, {}, "model set writer", path);
  });
  // The table first, as a file the loader reads from would list it.
  t.move_to_front(prefix + "embed_tokens.weight");
  for (const DemoAsset& a : demo_gemma_assets())
    t.add_bytes(a.name == "tokenizer.json" ? std::string("tokenizer_json")
                                           : "hf_asset__" + std::string(a.name),
                a.data);
  t.write(path, values, {{"format", "pt"}, {"gemma_config", gemma_config}});
}

void write_upsampler_file(const std::string& path, const json& config,
                          const FileTensorValues& values) {
  const auto cfg = models::upsampler::upsampler_config_from_json(config, path);
  FileTensors t(DType::BF16);
  t.add_component(with_prefix(""),
                  [&](io::WeightMap& w) { models::upsampler::LatentUpsampler::load(w, cfg); });
  t.write(path, values, {{"config", config.dump()}});
}

}  // namespace ltx::generate
