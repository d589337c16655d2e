#include "pipelines/a2vid.h"

#include <memory>
#include <optional>
#include <utility>

#include "core/error.h"
#include "models/audio_vae/audio_vae.h"
#include "models/transformer/model.h"
#include "pipelines/denoisers.h"
#include "pipelines/stages.h"
#include "sampling/params.h"
#include "sampling/schedulers.h"

namespace ltx::pipelines {

void validate_a2vid_request(const GenerationRequest& r, const Components& c) {
  const Tensor& a = r.input_audio;
  LTX_CHECK(a.defined(), "pipeline a2vid: no input audio; pass --audio-path");
  LTX_CHECK(a.dim() == 2 && a.size(1) > 0 && dtype_is_floating(a.dtype()), "pipeline a2vid: the input audio must be a ",
            "floating [channels, samples] waveform with samples > 0, got ", a.describe());
  LTX_CHECK(r.input_audio_rate > 0, "pipeline a2vid: the input audio's sample rate ", r.input_audio_rate,
            " must be positive");
  LTX_CHECK(c.audio_encoder, "pipeline a2vid: the audio VAE encoder is missing (pass a checkpoint with the audio "
            "VAE, or --audio-vae-path)");
  const int64_t channels = c.audio_encoder->config().in_channels;
  LTX_CHECK(a.size(0) == channels, "--audio-path: the audio has ", a.size(0), " channel", a.size(0) == 1 ? "" : "s",
            " but the audio VAE encoder takes ", channels, channels == 2 ? " (stereo)" : "",
            "; convert it first, e.g. ffmpeg -i in.wav -ac ", channels, " out.wav");
}

Tensor encode_input_audio(const GenerationRequest& r, const models::audio_vae::AudioEncoder& encoder, DType dtype) {
  models::audio_vae::Audio in;
  in.waveform = r.input_audio.to(Device::cpu(), DType::F32).unsqueeze(0);  // [1, C, N]
  in.sampling_rate = r.input_audio_rate;
  Tensor latent = models::audio_vae::encode_audio(in, encoder).to(Device::cpu(), DType::F32);
  // AudioLatentShape.from_duration(num_frames / frame_rate).frames: the reference slices to it
  // (a shorter latent would not fit the stage's audio grid).
  const int64_t frames = models::audio_vae::audio_latent_frames_for_video(r.num_frames, r.frame_rate);
  const double seconds = static_cast<double>(r.input_audio.size(1)) / static_cast<double>(r.input_audio_rate);
  LTX_CHECK(latent.size(2) >= frames, "--audio-path: the audio gives ", seconds, " s (", latent.size(2),
            " latent frames) but ", r.num_frames, " frames at ", r.frame_rate, " fps need ",
            static_cast<double>(r.num_frames) / r.frame_rate, " s (", frames,
            " latent frames); pass a longer clip, an earlier --audio-start-time or fewer --num-frames");
  return latent.narrow(2, 0, frames).contiguous().to(Device::cpu(), dtype);
}

GenerationResult run_a2vid(const GenerationRequest& r, const Components& c, const TextContexts& ctx,
                           const ProgressCallback& progress) {
  sampling::TorchCpuGenerator seeded(r.seed);
  sampling::NoiseSource& noise = r.noise ? *r.noise : seeded;

  // ---- the input audio
  if (progress) progress("audio conditioning", 0, 1);
  const Tensor audio_latent = encode_input_audio(r, *c.audio_encoder, r.dtype);
  if (progress) progress("audio conditioning", 1, 1);

  // ---- images, read + CRF once, encoded per stage
  std::vector<PreparedImage> images;
  if (!r.images.empty()) {
    if (progress) progress("image conditioning", 0, 1);
    images = prepare_images(r.images, static_cast<int>(sampling::detect_params(c.model_version).default_image_crf),
                            r.hdr);
  }
  const auto conditionings = [&](int64_t h, int64_t w) {
    return images.empty() ? sampling::ConditioningItems{}
                          : image_conditionings(images, h, w, *c.video_encoder, r.dtype, c.device);
  };

  // ---- stage 1: video at half size, guided; audio frozen
  const models::transformer::LTXModel& model1 = stage_model(c, Stage::One);
  StageConfig s1 = first_stage_config(r, c, model1, r.height / 2, r.width / 2, r.num_frames);
  s1.sigmas = sigmas_or(r.stage_1_sigmas, sampling::ltx2_schedule(r.num_inference_steps));
  ModalityInput video1;
  video1.conditionings = conditionings(s1.height, s1.width);
  if (!images.empty() && progress) progress("image conditioning", 1, 1);
  // The audio guider is MultiModalGuiderParams() (positive only) without a negative context: a
  // pass with the negative video prompt keeps the positive audio prompt.
  GuidedDenoiser d1(model1, {ctx.video_positive, ctx.video_negative}, {ctx.audio_positive, Tensor()},
                    r.video_guider, sampling::GuiderParams{});
  d1.set_max_batch_size(r.max_batch_size);
  d1.set_step_cache(r.step_cache);
  const StageOutput out1 =
      run_diffusion_stage(s1, std::move(video1), frozen_modality(audio_latent), d1.callback(), noise, progress);

  // ---- upsample
  if (progress) progress("upsample", 0, 1);
  const Tensor upscaled = upsample_on_device(out1.video_latent.narrow(0, 0, 1), latent_statistics(c),
                                             *c.spatial_upsampler, r.dtype, c.device);
  if (progress) progress("upsample", 1, 1);

  // ---- stage 2: full size, distilled sigmas, conditioned pass; audio frozen
  const models::transformer::LTXModel& model2 = stage_model(c, Stage::Two);
  GenerationRequest video_only = r;
  video_only.audio = false;  // the refinement's audio input is replaced by the frozen one below
  RefinementStage s2 = refinement_stage(s1, video_only, model2, upscaled, Tensor());
  s2.video.conditionings = conditionings(s2.config.height, s2.config.width);
  const SimpleDenoiser d2(model2, ctx.video_positive, ctx.audio_positive);
  const StageOutput out2 = run_diffusion_stage(s2.config, std::move(s2.video), frozen_modality(audio_latent),
                                               d2.callback(), noise, progress);

  GenerationResult res;
  res.video_latent = out2.video_latent;
  res.audio_latent = audio_latent;
  if (const models::transformer::StepCache* cache = d1.step_cache())
    res.step_cache.push_back({"stage 1", cache->computed(), cache->reused()});
  res.height = r.height;
  res.width = r.width;
  res.num_frames = r.num_frames;
  res.frame_rate = r.frame_rate;
  return res;
}

}  // namespace ltx::pipelines
