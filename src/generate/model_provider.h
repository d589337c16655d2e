#pragma once
// Where a generation gets its models. generate's steps ask a ModelProvider for each model when
// the step needs it and drop the returned pointer (a lease) when the step ends; the provider
// decides what happens then:
//
//   * OneShotProvider (`ltx generate`): loads from the files on every request and keeps nothing,
//     so each model is freed when its step ends -- the reference's order and memory peak;
//   * the resident engine's provider (generate/engine.h): serves them from a ModelCache, so a
//     second generation loads nothing.
//
// Leases must not outlive the provider.
#include <memory>
#include <string>
#include <vector>

#include "generate/decode.h"
#include "generate/model_paths.h"
#include "models/duration_head/duration_head.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/text/prompt_encoder.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "nn/module.h"

namespace ltx::generate {

class Progress;

// The transformer of the denoising stages and the LoRA fuser bound into it (null when no LoRA
// set can apply). Each stage makes the weights its own set with fuser->apply(set); the fuser
// restores the base values bit for bit, so whoever uses the model next gets exact weights.
struct StageTransformer {
  std::unique_ptr<lora::Fuser> fuser;
  std::unique_ptr<models::transformer::LTXModel> model;
};

class ModelProvider {
 public:
  virtual ~ModelProvider() = default;

  // Gemma + the text connectors of paths.text_encoder / paths.embeddings_weight_paths.
  // `streaming`: Gemma's layers streamed from host memory (--offload cpu).
  virtual std::shared_ptr<text::PromptEncoder> prompt_encoder(
      const ModelPaths& paths, const nn::LoadOptions& where,
      const models::BlockStreaming& streaming) = 0;
  // The duration head in `path`; null when the file has none.
  virtual std::shared_ptr<const models::duration_head::DurationHead> duration_head(
      const std::string& path, const nn::LoadOptions& where) = 0;
  // A LoRA file (the same pointer for the same file while the provider keeps it, so a fuser
  // sees an unchanged set as unchanged).
  virtual std::shared_ptr<const lora::LoraFile> lora_file(const std::string& path) = 0;
  // paths.transformer with a fuser that covers every set of `stage_sets` (the LoRA sets this
  // generation's stages will apply).
  virtual std::shared_ptr<StageTransformer> transformer(
      const ModelPaths& paths, const std::vector<lora::LoraSet>& stage_sets,
      const nn::LoadOptions& where, const models::BlockStreaming& streaming) = 0;
  virtual std::shared_ptr<const models::video_vae::VideoEncoder> video_encoder(
      const std::string& path, const nn::LoadOptions& where) = 0;
  virtual std::shared_ptr<const models::upsampler::LatentUpsampler> latent_upsampler(
      const std::string& path, const nn::LoadOptions& where) = 0;
  // The decode stage (decode_latents) with this provider's decoders; `audio_latent` undefined:
  // no audio decoder is needed.
  virtual DecodeResult decode(const Tensor& video_latent, const Tensor& audio_latent,
                              const ModelPaths& paths, MediaSink& sink,
                              const DecodeOptions& options, Progress* progress) = 0;
};

// Loads on every request, keeps nothing (`ltx generate`).
class OneShotProvider final : public ModelProvider {
 public:
  std::shared_ptr<text::PromptEncoder> prompt_encoder(
      const ModelPaths& paths, const nn::LoadOptions& where,
      const models::BlockStreaming& streaming) override;
  std::shared_ptr<const models::duration_head::DurationHead> duration_head(
      const std::string& path, const nn::LoadOptions& where) override;
  std::shared_ptr<const lora::LoraFile> lora_file(const std::string& path) override;
  std::shared_ptr<StageTransformer> transformer(const ModelPaths& paths,
                                                const std::vector<lora::LoraSet>& stage_sets,
                                                const nn::LoadOptions& where,
                                                const models::BlockStreaming& streaming) override;
  std::shared_ptr<const models::video_vae::VideoEncoder> video_encoder(
      const std::string& path, const nn::LoadOptions& where) override;
  std::shared_ptr<const models::upsampler::LatentUpsampler> latent_upsampler(
      const std::string& path, const nn::LoadOptions& where) override;
  DecodeResult decode(const Tensor& video_latent, const Tensor& audio_latent,
                      const ModelPaths& paths, MediaSink& sink, const DecodeOptions& options,
                      Progress* progress) override;
};

// The transformer of `path` (audio-video) with a fuser over `fuser_sets` when any of them is not
// the identity, its blocks streamed when `streaming` says so (the fuser then writes their host
// copies). Shared by the providers.
std::shared_ptr<StageTransformer> load_stage_transformer(
    const std::string& path, const std::vector<lora::LoraSet>& fuser_sets,
    const nn::LoadOptions& where, const models::BlockStreaming& streaming = {});

}  // namespace ltx::generate
