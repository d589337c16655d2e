#include "pipelines/dubit.h"

#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "core/error.h"
#include "models/audio_vae/audio_vae.h"
#include "models/tiling.h"
#include "models/transformer/model.h"
#include "models/video_vae/video_vae.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "pipelines/denoisers.h"
#include "pipelines/ic_lora.h"
#include "pipelines/stages.h"
#include "sampling/conditioning.h"
#include "sampling/latent.h"
#include "sampling/noise.h"
#include "sampling/schedulers.h"

namespace ltx::pipelines {

namespace {

// The reference's seconds between the last reference token's end and the generated audio's start.
constexpr double kReferenceGapSeconds = 0.04;

Tensor track_of(const DubItReference& ref) {
  return ref.waveform.dim() == 3 ? ref.waveform.squeeze(0) : ref.waveform;
}

std::string clip_name(const DubItReference& ref) {
  return ref.path.empty() ? std::string("--reference-video") : str("--reference-video '", ref.path, "'");
}

}  // namespace

void validate_dubit_reference(const GenerationRequest& r) {
  LTX_CHECK(r.dubit, "pipeline dubit: no reference clip given (pass --reference-video CLIP, a video with the voice "
            "to keep in its audio track)");
  const DubItReference& ref = *r.dubit;
  const std::string clip = clip_name(ref);
  LTX_CHECK(ref.frames.defined() && ref.frames.dim() == 4 && ref.frames.size(0) >= 1 && ref.frames.size(3) == 3 &&
                ref.frames.dtype() == DType::U8,
            "pipeline dubit: ", clip, " must decode to u8 RGB frames [F, H, W, 3], got ",
            ref.frames.defined() ? ref.frames.describe() : std::string("nothing"));
  LTX_CHECK(ref.frame_rate > 0.0 && std::isfinite(ref.frame_rate), "pipeline dubit: ", clip, " has no usable frame ",
            "rate (", ref.frame_rate, "); re-encode it with a constant frame rate, e.g. ffmpeg -i in.mp4 -r 24 out.mp4");
  LTX_CHECK(ref.strength >= 0.0 && ref.strength <= 1.0, "--reference-strength ", ref.strength, " must be in [0, 1]");
  LTX_CHECK(ref.waveform.defined(), "pipeline dubit: ", clip, " has no audio track; DubIt keeps the voice of the ",
            "reference clip's audio: pass a clip with sound");
  const Tensor track = track_of(ref);
  LTX_CHECK(track.dim() == 2 && track.size(1) > 0 && dtype_is_floating(track.dtype()), "pipeline dubit: the audio ",
            "track of ", clip, " must be a floating [channels, samples] waveform with samples > 0, got ", track.describe());
  LTX_CHECK(ref.sample_rate > 0, "pipeline dubit: the audio track of ", clip, " has sample rate ", ref.sample_rate,
            "; it must be positive");
}

GenerationRequest with_dubit_shape(const GenerationRequest& request) {
  GenerationRequest r = request;
  if (r.dubit && r.dubit->frames.defined() && r.dubit->frames.dim() == 4 && r.dubit->frames.size(0) >= 1) {
    r.num_frames = (r.dubit->frames.size(0) - 1) / 8 * 8 + 1;  // snap_frames_to_grid (the VAE's x8 time grid)
    r.frame_rate = r.dubit->frame_rate;
  }
  return r;
}

void validate_dubit_request(const GenerationRequest& r, const Components& c) {
  LTX_CHECK(r.images.empty(), "--image: the dubit pipeline conditions on --reference-video, not on images");
  LTX_CHECK(r.video_conditionings.empty() && !r.conditioning_attention_mask.defined() && !r.skip_stage_2,
            "pipeline dubit: --video-conditioning, --conditioning-attention-mask and --skip-stage-2 are IC-LoRA options "
            "(--pipeline ic-lora); DubIt's video reference is --reference-video");
  LTX_CHECK(r.audio, "pipeline dubit: DubIt generates speech: audio must stay on (an audio-video checkpoint)");
  LTX_CHECK(c.video_encoder, "pipeline dubit: the reference video needs the video VAE encoder (pass --video-vae-path or "
            "a full checkpoint)");
  LTX_CHECK(c.audio_encoder, "pipeline dubit: the reference clip's audio needs the audio VAE encoder (pass "
            "--audio-vae-path or a full checkpoint)");
  const int64_t channels = c.audio_encoder->config().in_channels;
  const Tensor track = track_of(*r.dubit);
  LTX_CHECK(track.size(0) == channels, clip_name(*r.dubit), ": the audio track has ", track.size(0), " channel",
            track.size(0) == 1 ? "" : "s", " but the audio VAE encoder takes ", channels, channels == 2 ? " (stereo)" : "",
            "; convert it first, e.g. ffmpeg -i in.mp4 -ac ", channels, " out.mp4");
  LTX_CHECK(r.reference_downscale_factor >= 1, "pipeline dubit: the IC-LoRA's reference_downscale_factor must be >= 1 "
            "(got ", r.reference_downscale_factor, ")");
  // The reference's DubIt reads only the downscale factor: every frame of the clip is a reference frame.
  LTX_CHECK(r.reference_temporal_scale_factor == 1, "pipeline dubit: a reference_temporal_scale_factor (",
            r.reference_temporal_scale_factor, ") is an IC-LoRA option; DubIt uses every frame of --reference-video");
  const int64_t f = r.reference_downscale_factor;
  LTX_CHECK((r.height / 2) % f == 0 && (r.width / 2) % f == 0, "pipeline dubit: stage 1 runs at ", r.height / 2, "x",
            r.width / 2, ", which the IC-LoRA's reference_downscale_factor ", f,
            " does not divide; pick --height / --width whose halves are multiples of ", f);
}

std::pair<Tensor, Tensor> patchify_dubit_audio_reference_latent(const Tensor& latent) {
  LTX_CHECK(latent.dim() == 4, "DubIt audio reference: expected a latent [B, C, T, mel], got ", latent.describe());
  const Tensor tokens = sampling::patchify_audio(latent);
  const Tensor times = sampling::audio_patch_grid_bounds(latent.size(0), tokens.size(1));  // f32 [B, 1, T, 2]
  // The last token's end time over the batch (the reference's positions[:, :, -1, 1].max()).
  const Tensor ends = times.narrow(2, times.size(2) - 1, 1).narrow(3, 1, 1).contiguous();
  const std::vector<float> e = ends.to_float_vector();
  float last = e.front();
  for (float v : e) last = std::max(last, v);
  // Two float32 subtractions, as the reference's positions - aud_dur - 0.04.
  const Tensor positions = ops::sub(ops::sub(times, static_cast<double>(last)), kReferenceGapSeconds);
  return {tokens, positions};
}

GenerationResult run_dubit(const GenerationRequest& request, const Components& c, const TextContexts& ctx,
                           const ProgressCallback& progress) {
  const GenerationRequest r = with_dubit_shape(request);
  const DubItReference& ref = *r.dubit;
  sampling::TorchCpuGenerator seeded(r.seed);
  sampling::NoiseSource& noise = r.noise ? *r.noise : seeded;

  const auto audio_reference = [](const Tensor& latent) {
    auto [tokens, positions] = patchify_dubit_audio_reference_latent(latent);
    return sampling::ConditioningItems{
        std::make_shared<sampling::AudioConditionByReferenceLatent>(tokens, positions, 1.0)};
  };
  // The reference video at one stage's size (the reference's _create_stage_conditionings without
  // images): tiled encode with the default tile sizes, no attention mask, attention strength 1.
  const std::vector<VideoConditioning> reference_video = {{ref.frames, ref.strength, ref.path}};
  const auto video_reference = [&](int64_t height, int64_t width) {
    ic_lora::ReferenceVideoOptions o;
    o.height = height;
    o.width = width;
    o.num_frames = r.num_frames;
    o.factors = {r.reference_downscale_factor, 1};
    o.dtype = r.dtype;
    o.device = c.device;
    o.encode_tiling = models::tiling::TileSizeConfig::default_config();
    sampling::ConditioningItems items;
    ic_lora::append_reference_video_conditionings(items, reference_video, *c.video_encoder, o);
    return items;
  };

  // ---- stage 1: half size; the video reference, the clip's voice appended to the audio
  const models::transformer::LTXModel& model1 = stage_model(c, Stage::One);
  StageConfig s1 = first_stage_config(r, c, model1, r.height / 2, r.width / 2, r.num_frames);
  s1.sigmas = sigmas_or(r.stage_1_sigmas, sampling::distilled_sigmas());
  if (progress) progress("reference conditioning", 0, 1);
  ModalityInput video1;
  video1.conditionings = video_reference(s1.height, s1.width);
  models::audio_vae::Audio track;
  track.waveform = track_of(ref).to(Device::cpu(), DType::F32).unsqueeze(0);  // [1, C, N]
  track.sampling_rate = ref.sample_rate;
  // The whole track, encoded on the encoder's device (the reference encodes it uncut).
  const Tensor voice = models::audio_vae::encode_audio(track, *c.audio_encoder).to(Device::cpu(), r.dtype);
  ModalityInput audio1;
  audio1.conditionings = audio_reference(voice);
  if (progress) progress("reference conditioning", 1, 1);
  StageOutput out1;
  {
    const SimpleDenoiser d(model1, ctx.video_positive, ctx.audio_positive);
    out1 = run_diffusion_stage(s1, video1, audio1, d.callback(), noise, progress);
  }

  // ---- stage 2: x2 upsample; the reference at full size; stage 1's audio frozen and appended
  if (progress) progress("upsample", 0, 1);
  const Tensor upscaled = upsample_on_device(out1.video_latent.narrow(0, 0, 1).contiguous(), latent_statistics(c),
                                             *c.spatial_upsampler, r.dtype, c.device);
  if (progress) progress("upsample", 1, 1);
  const models::transformer::LTXModel& model2 = stage_model(c, Stage::Two);
  GenerationRequest video_only = r;
  video_only.audio = false;  // the stage's audio is the frozen one below
  RefinementStage s2 = refinement_stage(s1, video_only, model2, upscaled, Tensor());
  s2.video.conditionings = video_reference(s2.config.height, s2.config.width);
  ModalityInput audio2 = frozen_modality(out1.audio_latent);
  audio2.conditionings = audio_reference(out1.audio_latent);
  StageOutput out2;
  {
    const SimpleDenoiser d(model2, ctx.video_positive, ctx.audio_positive);
    out2 = run_diffusion_stage(s2.config, s2.video, audio2, d.callback(), noise, progress);
  }

  GenerationResult res;
  res.height = r.height;
  res.width = r.width;
  res.num_frames = r.num_frames;
  res.frame_rate = r.frame_rate;
  res.video_latent = out2.video_latent;
  res.audio_latent = out1.audio_latent;
  return res;
}

}  // namespace ltx::pipelines
