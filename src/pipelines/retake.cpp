#include "pipelines/retake.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "core/error.h"
#include "media/preprocess.h"
#include "models/audio_vae/audio_vae.h"
#include "models/tiling.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/denoisers.h"
#include "pipelines/stages.h"
#include "sampling/conditioning.h"
#include "sampling/noise.h"
#include "sampling/schedulers.h"

namespace ltx::pipelines {

namespace {

double clip_seconds(const RetakeSource& s, double frame_rate) {
  return static_cast<double>(s.frames.size(0)) / frame_rate;
}

// The audio track as [1, C, N].
Tensor batched_waveform(const Tensor& w) { return w.dim() == 2 ? w.unsqueeze(0) : w; }

}  // namespace

void validate_retake_source(const GenerationRequest& r, const Components* c) {
  LTX_CHECK(r.retake, "pipeline retake: no source clip given (pass --video-path CLIP)");
  const RetakeSource& s = *r.retake;
  LTX_CHECK(s.frames.defined() && s.frames.dim() == 4 && s.frames.size(3) == 3 &&
                (s.frames.dtype() == DType::U8 || s.frames.dtype() == DType::F32),
            "pipeline retake: --video-path must decode to u8 RGB frames [F, H, W, 3] (or an EXR folder's f32 ",
            "frames), got ", s.frames.defined() ? s.frames.describe() : std::string("nothing"));
  LTX_CHECK(s.frames.dtype() == DType::U8 || r.hdr, "pipeline retake: --video-path is an EXR folder: EXR input "
            "requires --hdr ", media::hdr_color_space_choices(), " to declare the source colour space");
  const int64_t f = s.frames.size(0), h = s.frames.size(1), w = s.frames.size(2);
  LTX_CHECK(f >= 1 && (f - 1) % 8 == 0, "pipeline retake: --video-path has ", f,
            " frames; the frame count must be 8k + 1 (e.g. 97, 193): use a clip with ",
            std::max<int64_t>(1, (f - 1) / 8 * 8 + 1), " frames");
  LTX_CHECK(h > 0 && w > 0 && h % 32 == 0 && w % 32 == 0, "pipeline retake: --video-path is ", w, "x", h,
            " (width x height); both must be multiples of 32");
  LTX_CHECK(r.frame_rate > 0 && std::isfinite(r.frame_rate), "pipeline retake: the clip's frame rate ",
            r.frame_rate, " must be a positive number");
  LTX_CHECK(std::isfinite(s.start_time) && s.start_time >= 0, "pipeline retake: --start-time ", s.start_time,
            " must be >= 0");
  LTX_CHECK(std::isfinite(s.end_time) && s.end_time > s.start_time, "pipeline retake: --end-time ", s.end_time,
            " must be greater than --start-time ", s.start_time);
  const double duration = clip_seconds(s, r.frame_rate);
  LTX_CHECK(s.end_time <= duration, "pipeline retake: --end-time ", s.end_time, " s is past the end of the clip (",
            f, " frames at ", r.frame_rate, " fps = ", duration, " s); pick a window inside the clip");
  LTX_CHECK(!c || c->video_encoder, "pipeline retake: the video VAE encoder is needed to encode the source clip "
            "(pass --video-vae-path or a full checkpoint)");
  if (s.waveform.defined() && r.audio) {
    const Tensor wf = batched_waveform(s.waveform);
    LTX_CHECK(wf.dim() == 3 && wf.size(0) == 1 && wf.size(2) > 0, "pipeline retake: the audio track of --video-path ",
              "must be [C, N] samples with N > 0, got ", s.waveform.describe());
    LTX_CHECK(s.sample_rate > 0, "pipeline retake: the audio track of --video-path has no sample rate");
    LTX_CHECK(!c || c->audio_encoder, "pipeline retake: the clip has an audio track and the audio VAE encoder is needed to ",
              "encode it (pass --audio-vae-path or a full checkpoint)");
    if (c && c->audio_encoder)
      LTX_CHECK(wf.size(1) == c->audio_encoder->config().in_channels, "pipeline retake: the audio track of ",
                "--video-path has ", wf.size(1), " channel(s); the audio encoder takes ",
                c->audio_encoder->config().in_channels, " (use a clip with a stereo track)");
  }
}

GenerationRequest with_retake_shape(const GenerationRequest& request) {
  GenerationRequest r = request;
  if (r.retake && r.retake->frames.defined() && r.retake->frames.dim() == 4) {
    r.num_frames = r.retake->frames.size(0);
    r.height = r.retake->frames.size(1);
    r.width = r.retake->frames.size(2);
  }
  return r;
}

GenerationResult run_retake(const GenerationRequest& request, const Components& c, const TextContexts& ctx,
                            const ProgressCallback& progress) {
  const GenerationRequest r = with_retake_shape(request);
  const RetakeSource& src = *r.retake;
  sampling::TorchCpuGenerator seeded(r.seed);
  sampling::NoiseSource& noise = r.noise ? *r.noise : seeded;
  const models::transformer::LTXModel& model = stage_model(c, Stage::One);
  StageConfig s = first_stage_config(r, c, model, r.height, r.width, r.num_frames);
  s.sigmas = sigmas_or(r.stage_1_sigmas, sampling::distilled_sigmas());

  // video_latent_from_file: every frame (their times are all below frames / fps), resized to the
  // clip's own size (an identity) and normalised in the pipeline dtype (an EXR folder: into the
  // --hdr working space, center crop), tiled encode with the default tile sizes, conformed to the
  // latent frame count of the clip.
  if (progress) progress("source encoding", 0, 1);
  const Tensor pixels = conditioning_pixels(src.frames, r.height, r.width, r.dtype, r.hdr,
                                            media::ResizeMode::CenterCrop, "--video-path")
                            .to(c.device, DType::F32);
  const int64_t latent_frames = (r.num_frames - 1) / s.scale.time + 1;
  const Tensor video_latent = models::audio_vae::conform_latent_length(
      c.video_encoder->tiled_encode(pixels, models::tiling::TileSizeConfig::default_config())
          .to(Device::cpu(), r.dtype),
      latent_frames);

  // audio_latent_from_file: the track's first round(frames / fps * rate) samples, encoded at the
  // encoder's rate, conformed to the audio latent length of the clip.
  Tensor audio_latent;
  if (r.audio && src.waveform.defined()) {
    const Tensor wf = batched_waveform(src.waveform).to(DType::F32);
    const auto keep = static_cast<int64_t>(std::nearbyint(clip_seconds(src, r.frame_rate) *
                                                          static_cast<double>(src.sample_rate)));
    const Tensor trimmed = wf.narrow(2, 0, std::min(keep, wf.size(2))).contiguous();
    const Tensor mel = c.audio_encoder->processor().waveform_to_mel({trimmed, src.sample_rate});
    audio_latent = models::audio_vae::conform_latent_length(
        c.audio_encoder->forward(mel.to(c.device)).to(Device::cpu(), r.dtype),
        models::audio_vae::audio_latent_frames_for_video(r.num_frames, r.frame_rate));
  }
  if (progress) progress("source encoding", 1, 1);

  const auto window = std::make_shared<sampling::TemporalRegionMask>(src.start_time, src.end_time, r.frame_rate);
  ModalityInput video;
  video.conditionings = {window};
  video.initial_latent = video_latent;
  std::optional<ModalityInput> audio;
  if (r.audio) {
    audio = ModalityInput{};
    if (audio_latent.defined()) {
      audio->conditionings = {window};
      audio->initial_latent = audio_latent;
    }
  }
  const SimpleDenoiser d(model, ctx.video_positive, r.audio ? ctx.audio_positive : Tensor());
  const StageOutput out = run_diffusion_stage(s, video, audio, d.callback(), noise, progress);

  GenerationResult res;
  res.height = r.height;
  res.width = r.width;
  res.num_frames = r.num_frames;
  res.frame_rate = r.frame_rate;
  res.video_latent = out.video_latent;
  res.audio_latent = out.audio_latent;
  return res;
}

}  // namespace ltx::pipelines
