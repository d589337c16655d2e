#include "pipelines/keyframe_interpolation.h"

#include <memory>
#include <optional>

#include "models/video_vae/video_vae.h"
#include "pipelines/denoisers.h"
#include "sampling/noise.h"
#include "sampling/params.h"
#include "sampling/schedulers.h"

namespace ltx::pipelines {

sampling::ConditioningItems keyframe_conditionings(const std::vector<PreparedImage>& images, int64_t height,
                                                   int64_t width, const models::video_vae::VideoEncoder& encoder,
                                                   DType dtype, Device device) {
  sampling::ConditioningItems items;
  for (const PreparedImage& im : images) {
    const Tensor latent = encode_image(im, height, width, encoder, dtype, device);
    items.push_back(std::make_shared<sampling::VideoConditionByKeyframeIndex>(latent, im.frame_index, im.strength));
  }
  return items;
}

GenerationResult run_keyframe_interpolation(const GenerationRequest& r, const Components& c,
                                            const TextContexts& ctx, const ProgressCallback& progress) {
  // One generator for the whole run: stage-1 video, stage-1 audio, stage-2 video, stage-2 audio.
  sampling::TorchCpuGenerator seeded(r.seed);
  sampling::NoiseSource& noise = r.noise ? *r.noise : seeded;

  // Images: read + CRF once, then resized and encoded per stage.
  std::vector<PreparedImage> images;
  if (!r.images.empty()) {
    if (progress) progress("image conditioning", 0, 1);
    images = prepare_images(r.images, static_cast<int>(sampling::detect_params(c.model_version).default_image_crf),
                            r.hdr);
  }
  auto conditionings = [&](int64_t h, int64_t w) {
    return images.empty() ? sampling::ConditioningItems{}
                          : keyframe_conditionings(images, h, w, *c.video_encoder, r.dtype, c.device);
  };

  const models::transformer::LTXModel& model1 = stage_model(c, Stage::One);
  StageConfig s1 = first_stage_config(r, c, model1, r.height / 2, r.width / 2, r.num_frames);
  s1.sigmas = r.stage_1_sigmas ? *r.stage_1_sigmas : sampling::ltx2_schedule(r.num_inference_steps);
  ModalityInput video1;
  video1.conditionings = conditionings(s1.height, s1.width);
  if (!images.empty() && progress) progress("image conditioning", 1, 1);
  std::optional<ModalityInput> audio1;
  if (r.audio) audio1 = ModalityInput{};
  StageOutput out1;
  std::vector<StepCacheReport> stage1_cache;
  {
    GuidedDenoiser d(model1, {ctx.video_positive, ctx.video_negative},
                     {r.audio ? ctx.audio_positive : Tensor(), r.audio ? ctx.audio_negative : Tensor()},
                     r.video_guider, r.audio_guider);
    d.set_max_batch_size(r.max_batch_size);
    d.set_step_cache(r.step_cache);
    out1 = run_diffusion_stage(s1, video1, audio1, d.callback(), noise, progress);
    if (const models::transformer::StepCache* cache = d.step_cache())
      stage1_cache.push_back({"stage 1", cache->computed(), cache->reused()});
  }

  if (progress) progress("upsample", 0, 1);
  const Tensor upscaled = upsample_on_device(out1.video_latent.narrow(0, 0, 1), latent_statistics(c),
                                             *c.spatial_upsampler, r.dtype, c.device);
  if (progress) progress("upsample", 1, 1);

  const models::transformer::LTXModel& model2 = stage_model(c, Stage::Two);
  RefinementStage s2 = refinement_stage(s1, r, model2, upscaled, out1.audio_latent);
  s2.video.conditionings = conditionings(s2.config.height, s2.config.width);
  const SimpleDenoiser d2(model2, ctx.video_positive, r.audio ? ctx.audio_positive : Tensor());
  const StageOutput out2 = run_diffusion_stage(s2.config, s2.video, s2.audio, d2.callback(), noise, progress);

  GenerationResult res;
  res.height = r.height;
  res.width = r.width;
  res.num_frames = r.num_frames;
  res.frame_rate = r.frame_rate;
  res.video_latent = out2.video_latent;
  res.audio_latent = out2.audio_latent;  // stage 2's: this pipeline keeps the refined audio
  res.step_cache = std::move(stage1_cache);
  return res;
}

}  // namespace ltx::pipelines
