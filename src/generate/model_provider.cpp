#include "generate/model_provider.h"

#include "generate/placement.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "quantization/file_format.h"
#include "quantization/fp8_cast.h"

namespace ltx::generate {

namespace tf = models::transformer;

std::shared_ptr<StageTransformer> load_stage_transformer(
    const std::string& path, const std::vector<lora::LoraSet>& fuser_sets,
    const nn::LoadOptions& where, const models::BlockStreaming& streaming) {
  auto st = std::make_shared<StageTransformer>();
  bool any = false;
  for (const lora::LoraSet& set : fuser_sets) any = any || !lora::is_identity(set);
  // A GGUF file (the community quantizations) binds its block-quantized Linears as stored.
  const auto config = tf::LTXModelConfig::from_metadata(io::checkpoint_metadata_json(path),
                                                        tf::LTXModelType::AudioVideo, path);
  io::WeightMap w = io::WeightMap::open_checkpoints(
      {path}, tf::transformer_key_map(tf::LTXModelType::AudioVideo));
  quantization::check_mode_fits(path, where.quantization);
  if (where.quantization == quantization::Mode::Fp8Cast)
    quantization::fold_prequant_scales(w, path);
  // Streamed blocks are bound on the host, so their fusion buffers are made there.
  if (any)
    st->fuser = std::make_unique<lora::Fuser>(w, fuser_sets, where, [&](const std::string& target) {
      const int64_t block = tf::LTXModel::block_index(target);
      return block >= 0 && streaming.streams(block);
    });
  st->model = std::make_unique<tf::LTXModel>(tf::LTXModel::load(w, config, where, streaming));
  // Streaming packed the blocks' host weights into page-locked memory: fusion writes there now.
  if (st->fuser && st->model->streams_blocks())
    st->fuser->rebind([&](const Tensor& t) { return st->model->streamed_home(t); }, where.device);
  return st;
}

std::shared_ptr<text::PromptEncoder> OneShotProvider::prompt_encoder(
    const ModelPaths& paths, const nn::LoadOptions& where,
    const models::BlockStreaming& streaming) {
  // The reference's lifecycle: Gemma and the connectors each loaded, used and freed in encode().
  text::PromptEncoderOptions options;
  options.load = where;
  options.streaming = streaming;
  return std::make_shared<text::PromptEncoder>(paths.text_encoder.path,
                                               paths.embeddings_weight_paths, options);
}

std::shared_ptr<const models::duration_head::DurationHead> OneShotProvider::duration_head(
    const std::string& path, const nn::LoadOptions& where) {
  auto head = models::duration_head::DurationHead::try_from_file(path, where);
  if (!head) return nullptr;
  return std::make_shared<const models::duration_head::DurationHead>(std::move(*head));
}

std::shared_ptr<const lora::LoraFile> OneShotProvider::lora_file(const std::string& path) {
  return lora::LoraFile::open(path);
}

std::shared_ptr<StageTransformer> OneShotProvider::transformer(
    const ModelPaths& paths, const std::vector<lora::LoraSet>& stage_sets,
    const nn::LoadOptions& where, const models::BlockStreaming& streaming) {
  return load_stage_transformer(paths.transformer.path, stage_sets,
                                transformer_placement(where, paths.quantization), streaming);
}

std::shared_ptr<const models::video_vae::VideoEncoder> OneShotProvider::video_encoder(
    const std::string& path, const nn::LoadOptions& where) {
  return std::make_shared<const models::video_vae::VideoEncoder>(
      models::video_vae::VideoEncoder::from_file(path, where));
}

std::shared_ptr<const models::upsampler::LatentUpsampler> OneShotProvider::latent_upsampler(
    const std::string& path, const nn::LoadOptions& where) {
  return std::make_shared<const models::upsampler::LatentUpsampler>(
      models::upsampler::LatentUpsampler::from_file(path, where));
}

DecodeResult OneShotProvider::decode(const Tensor& video_latent, const Tensor& audio_latent,
                                     const ModelPaths& paths, MediaSink& sink,
                                     const DecodeOptions& options, Progress* progress) {
  // Each decoder loaded when its step starts and freed when it ends.
  return decode_latents(video_latent, audio_latent, paths.video_vae.path, paths.audio_vae.path,
                        sink, options, progress);
}

}  // namespace ltx::generate
