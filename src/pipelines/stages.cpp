#include "pipelines/stages.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <utility>

#include "core/error.h"
#include "media/exr.h"
#include "media/image.h"
#include "media/preprocess.h"
#include "models/transformer/config.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "ops/shape.h"
#include "sampling/non_finite_watch.h"
#include "sampling/params.h"
#include "sampling/steps.h"

namespace ltx::pipelines {

using sampling::AVState;
using sampling::LatentState;

LatentWidths latent_widths(const models::transformer::LTXModelConfig& config) {
  LatentWidths w;
  w.video_channels = config.in_channels;
  w.audio_mel_bins = 16;
  LTX_CHECK(config.audio_in_channels % w.audio_mel_bins == 0, "pipeline: the transformer's audio_in_channels ",
            config.audio_in_channels, " is not a multiple of the ", w.audio_mel_bins, " mel bins of the audio latent");
  w.audio_channels = config.audio_in_channels / w.audio_mel_bins;
  return w;
}

const models::transformer::LTXModel& stage_model(const Components& c, Stage stage) {
  return c.stage_transformer ? c.stage_transformer(stage) : *c.transformer;
}

sampling::Sigmas sigmas_or(const std::optional<std::vector<float>>& override_sigmas, sampling::Sigmas fallback) {
  return override_sigmas ? *override_sigmas : std::move(fallback);
}

sampling::SpatioTemporalScaleFactors latent_scale_factors(const Components& c) {
  if (!c.video_encoder) return {};
  const auto f = c.video_encoder->video_scale_factors();
  return {f.time, f.height, f.width};
}

const models::video_vae::PerChannelStatistics& latent_statistics(const Components& c) {
  return c.latent_statistics ? *c.latent_statistics : c.video_encoder->per_channel_statistics();
}

StageConfig first_stage_config(const GenerationRequest& r, const Components& c,
                               const models::transformer::LTXModel& model, int64_t height, int64_t width,
                               int64_t num_frames) {
  StageConfig s;
  s.name = "stage 1";
  s.height = height;
  s.width = width;
  s.num_frames = num_frames;
  s.frame_rate = r.frame_rate;
  s.dtype = r.dtype;
  s.device = c.device;
  s.widths = latent_widths(model.config());
  s.scale = latent_scale_factors(c);
  return s;
}

RefinementStage refinement_stage(const StageConfig& first, const GenerationRequest& r,
                                 const models::transformer::LTXModel& model, const Tensor& upscaled,
                                 const Tensor& first_audio) {
  RefinementStage st;
  StageConfig& s = st.config;
  s = first;
  s.name = "stage 2";
  s.height = r.height;
  s.width = r.width;
  s.widths = latent_widths(model.config());
  s.sigmas = sigmas_or(r.stage_2_sigmas, sampling::stage2_distilled_sigmas());
  // The reference passes sigmas[0].item(): the float32 value widened to double.
  const double sigma0 = static_cast<double>(s.sigmas.front());
  st.video.noise_scale = sigma0;
  st.video.initial_latent = upscaled;
  if (r.audio) {
    st.audio = ModalityInput{};
    st.audio->noise_scale = sigma0;
    st.audio->initial_latent = first_audio;
  }
  return st;
}

ModalityInput frozen_modality(const Tensor& latent) {
  ModalityInput m;
  m.noise_scale = 0.0;
  m.initial_latent = latent;
  m.frozen = true;
  return m;
}

namespace {

// The reference tells an EXR still by its name (str(path).lower().endswith(".exr")).
bool has_exr_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext == ".exr";
}

}  // namespace

std::vector<PreparedImage> prepare_images(const std::vector<ImageConditioning>& images, int default_crf,
                                          std::optional<media::HdrColorSpace> hdr) {
  std::vector<PreparedImage> out;
  for (const ImageConditioning& im : images) {
    PreparedImage p;
    const bool exr_file = !im.image.defined() && has_exr_extension(im.path);
    p.pixels = im.image.defined() ? im.image : exr_file ? media::read_exr(im.path) : media::read_image(im.path);
    if (p.pixels.dtype() == DType::U8) {
      const int crf = im.crf.value_or(default_crf);
      if (crf > 0) p.pixels = media::crf_recompress(p.pixels, crf);
    } else {
      // An EXR still: HDR, never CRF re-encoded (load_image_and_preprocess's .exr branch).
      LTX_CHECK(hdr, "--image '", im.path, "': EXR input requires --hdr ", media::hdr_color_space_choices(),
                " to declare the source colour space");
    }
    p.frame_index = im.frame_index;
    p.strength = im.strength;
    p.hdr = hdr;
    out.push_back(std::move(p));
  }
  return out;
}

Tensor conditioning_pixels(const Tensor& frames, int64_t height, int64_t width, DType dtype,
                           const std::optional<media::HdrColorSpace>& hdr, media::ResizeMode fit,
                           const std::string& who) {
  if (frames.dtype() == DType::U8)
    return media::normalize_to_unit_range(media::resize_and_center_crop(frames, height, width), dtype);
  LTX_CHECK(hdr, who, ": EXR input requires --hdr ", media::hdr_color_space_choices(),
            " to declare the source colour space");
  return media::prepare_hdr_frames(frames, height, width, *hdr, fit, dtype);
}

Tensor encode_image(const PreparedImage& image, int64_t height, int64_t width,
                    const models::video_vae::VideoEncoder& encoder, DType dtype, Device device) {
  const Tensor pixels = conditioning_pixels(image.pixels, height, width, dtype, image.hdr,
                                            media::ResizeMode::CenterCrop, "conditioning image")
                            .to(device, DType::F32);
  return encoder(pixels).to(Device::cpu(), dtype);
}

sampling::ConditioningItems image_conditionings(const std::vector<PreparedImage>& images, int64_t height,
                                                int64_t width, const models::video_vae::VideoEncoder& encoder,
                                                DType dtype, Device device) {
  sampling::ConditioningItems items;
  for (const PreparedImage& im : images) {
    const Tensor latent = encode_image(im, height, width, encoder, dtype, device);
    if (im.frame_index == 0)
      items.push_back(std::make_shared<sampling::VideoConditionByLatentIndex>(latent, im.strength, 0));
    else
      items.push_back(std::make_shared<sampling::VideoConditionByKeyframeIndex>(latent, im.frame_index, im.strength));
  }
  return items;
}

Tensor upsample_on_device(const Tensor& latent, const models::video_vae::PerChannelStatistics& stats,
                          const models::upsampler::LatentUpsampler& upsampler, DType dtype, Device device) {
  return models::upsampler::upsample_video(latent.to(device), stats, upsampler).to(Device::cpu(), dtype);
}

std::vector<int64_t> resolve_generated_keyframes(int64_t count, const std::vector<int64_t>& explicit_positions,
                                                 int64_t num_frames) {
  if (explicit_positions.empty()) return sampling::evenly_spaced_keyframe_positions(count, num_frames);
  std::vector<int64_t> p = explicit_positions;
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  LTX_CHECK(p.front() >= 0 && p.back() < num_frames, "generated keyframes: positions must lie in [0, ", num_frames,
            "), got ", p.front(), " ... ", p.back());
  return p;
}

void require_keyframe_embedding(const models::transformer::LTXModelConfig& config, const std::string& pipeline) {
  LTX_CHECK(config.use_keyframes_abs_pos_embedding, "pipeline ", pipeline,
            ": generated keyframe slots were requested, but the transformer config does not set "
            "use_keyframes_abs_pos_embedding, so the model has no keyframe absolute-position embedding; use a "
            "generated-keyframe (LTX-2.5) checkpoint or drop the keyframe request");
}

namespace {

// Draws a [B, ...] tensor as B draws of [1, ...], sample b's from its own source: each sample
// gets exactly the noise its solo run draws.
class PerSampleNoise final : public sampling::NoiseSource {
 public:
  explicit PerSampleNoise(std::vector<sampling::NoiseSource*> sources) : sources_(std::move(sources)) {}
  Tensor randn(const Shape& shape, DType dtype) override {
    LTX_CHECK(shape.size() >= 1 && shape[0] == static_cast<int64_t>(sources_.size()), "batched noise: a draw of ",
              shape.str(), " for a batch of ", sources_.size(), " samples");
    if (sources_.size() == 1) return sources_.front()->randn(shape, dtype);
    Shape one = shape;
    one[0] = 1;
    std::vector<Tensor> parts;
    for (sampling::NoiseSource* s : sources_) parts.push_back(s->randn(one, dtype));
    return ops::concat(parts, 0);
  }

 private:
  std::vector<sampling::NoiseSource*> sources_;
};

Tensor concat_defined(const std::vector<LatentState>& states, Tensor LatentState::*field, const char* name) {
  const bool defined = (states.front().*field).defined();
  std::vector<Tensor> parts;
  for (const LatentState& s : states) {
    LTX_CHECK((s.*field).defined() == defined, "batched stage: the samples' ", name,
              " differ in presence (a batch needs the same conditioning layout)");
    if (defined) parts.push_back(s.*field);
  }
  if (!defined) return Tensor();
  const auto per_sample = [](const Tensor& t) {
    Shape s = t.shape();
    s[0] = 1;
    return s;
  };
  for (const Tensor& t : parts)
    LTX_CHECK(t.dim() >= 1 && per_sample(t) == per_sample(parts.front()),
              "batched stage: the samples' ", name, " differ in shape (", t.shape().str(), " vs ",
              parts.front().shape().str(), "; a batch needs the same size, frames and conditioning layout)");
  return ops::concat(parts, 0);
}

// blocks._build_state's frozen branch: mask zeros (on the host, where the state is built), flagged.
void freeze(LatentState& s) {
  s.denoise_mask = Tensor::zeros(s.denoise_mask.shape(), s.denoise_mask.dtype());
  s.frozen = true;
  s.mask_levels = nullptr;
}

// The samples' states joined along the batch (mask levels are re-read from the joined mask).
LatentState concat_states(const std::vector<LatentState>& states) {
  if (states.size() == 1) return states.front();
  LatentState r = states.front();
  r.latent = concat_defined(states, &LatentState::latent, "latents");
  r.denoise_mask = concat_defined(states, &LatentState::denoise_mask, "denoise masks");
  r.positions = concat_defined(states, &LatentState::positions, "positions");
  r.clean_latent = concat_defined(states, &LatentState::clean_latent, "clean latents");
  r.attention_mask = concat_defined(states, &LatentState::attention_mask, "attention masks");
  r.keyframes_mask = concat_defined(states, &LatentState::keyframes_mask, "keyframe masks");
  r.generated_keyframes = concat_defined(states, &LatentState::generated_keyframes, "generated keyframes");
  r.mask_levels = nullptr;
  for (const LatentState& s : states) {
    LTX_CHECK(s.frozen == r.frozen, "batched stage: a frozen state batched with a live one");
    LTX_CHECK(s.generated_keyframe_layout.has_value() == r.generated_keyframe_layout.has_value() &&
                  (!s.generated_keyframe_layout || s.generated_keyframe_layout->pixel_frame_indices ==
                                                       r.generated_keyframe_layout->pixel_frame_indices),
              "batched stage: the samples' generated keyframe slots differ");
  }
  return r;
}

// Sample i of a joined state, as its own contiguous state.
LatentState sample_of(const LatentState& s, int64_t i) {
  LatentState r = s;
  for (Tensor* t : {&r.latent, &r.denoise_mask, &r.positions, &r.clean_latent, &r.attention_mask, &r.keyframes_mask,
                    &r.generated_keyframes})
    if (t->defined()) *t = t->narrow(0, i, 1).contiguous();
  r.mask_levels = nullptr;
  return r;
}

}  // namespace

StageOutput run_diffusion_stage(const StageConfig& c, const std::optional<ModalityInput>& video,
                                const std::optional<ModalityInput>& audio, const sampling::Denoiser& denoiser,
                                sampling::NoiseSource& noise, const ProgressCallback& progress) {
  StageSample sample;
  sample.video = video;
  sample.audio = audio;
  sample.noise = &noise;
  sample.ancestral_seed = c.ancestral_seed;
  return std::move(run_diffusion_stage_batch(c, {sample}, denoiser, progress).front());
}

std::vector<StageOutput> run_diffusion_stage_batch(const StageConfig& c, const std::vector<StageSample>& samples,
                                                   const sampling::Denoiser& denoiser, const ProgressCallback& progress) {
  LTX_CHECK(!samples.empty(), "pipeline ", c.name, ": a batch of no samples");
  const StageSample& first = samples.front();
  LTX_CHECK(first.video || first.audio, "pipeline ", c.name, ": neither video nor audio to denoise");
  LTX_CHECK(c.sigmas.size() >= 2, "pipeline ", c.name, ": need at least 2 sigmas, got ", c.sigmas.size());
  LTX_CHECK(samples.size() == 1 || c.sampler != Sampler::Res2s, "pipeline ", c.name,
            ": the res_2s sampler runs one sample at a time (its noise is not the sample's)");
  const sampling::VideoPixelShape pixel{1, c.num_frames, c.height, c.width, c.frame_rate};

  sampling::VideoLatentTools vt;
  vt.target = sampling::VideoLatentShape::from_pixel_shape(pixel, c.widths.video_channels, c.scale);
  vt.fps = c.frame_rate;
  vt.scale = c.scale;
  sampling::AudioLatentTools at;
  at.target = sampling::AudioLatentShape::from_video_pixel_shape(pixel, c.widths.audio_channels, c.widths.audio_mel_bins);

  // Each sample's states alone, noise draws video first, then audio (the reference builds the
  // states in this order), from the sample's generator.
  std::vector<LatentState> videos, audios;
  for (size_t i = 0; i < samples.size(); ++i) {
    const StageSample& s = samples[i];
    LTX_CHECK(s.noise, "pipeline ", c.name, ": sample ", i, " has no noise source");
    LTX_CHECK(s.video.has_value() == first.video.has_value() && s.audio.has_value() == first.audio.has_value(),
              "pipeline ", c.name, ": sample ", i, " differs from sample 0 in its modalities (audio on / off)");
    if (s.video)
      videos.push_back(sampling::create_noised_state(vt, s.video->conditionings, *s.noise, c.dtype,
                                                     s.video->noise_scale, s.video->initial_latent));
    if (s.audio)
      audios.push_back(sampling::create_noised_state(at, s.audio->conditionings, *s.noise, c.dtype,
                                                     s.audio->noise_scale, s.audio->initial_latent));
    if (s.video && s.video->frozen) freeze(videos.back());
    if (s.audio && s.audio->frozen) freeze(audios.back());
  }
  AVState st;
  if (!videos.empty()) st.video = concat_states(videos);
  if (!audios.empty()) st.audio = concat_states(audios);

  // One upload of every state tensor; the loop then stays on the device.
  st = sampling::on_device(st, c.device);

  const int64_t total = static_cast<int64_t>(c.sigmas.size()) - 1;
  if (progress) progress(c.name, 0, total);
  // NaN / Inf in the latents: the initial states, every prediction (the step it belongs to counted
  // here: res_2s calls the model twice a step) and the final states (sampling/non_finite_watch.h).
  sampling::NonFiniteWatch watch(c.name);
  const auto watch_states = [&](const AVState& s, const std::string& when) {
    if (s.video) watch.check(s.video->latent, "video", when);
    if (s.audio) watch.check(s.audio->latent, "audio", when);
  };
  watch_states(st, "the initial noise and conditioning, before step 1");
  int64_t steps_done = 0;
  const sampling::Denoiser watched = [&](const LatentState* video, const LatentState* audio,
                                         const std::vector<double>& sigmas, int64_t step_index) {
    sampling::DenoiseOutput out = denoiser(video, audio, sigmas, step_index);
    const std::string when = str("the transformer's prediction at step ", steps_done + 1, " of ", total);
    watch.check(out.video.denoised, "video", when);
    watch.check(out.audio.denoised, "audio", when);
    return out;
  };
  const sampling::StepCallback on_step = [&](int64_t done, int64_t n) {
    steps_done = done;
    if (progress) progress(c.name, done, n);
  };

  switch (c.sampler) {
    case Sampler::Euler: st = sampling::euler_loop(c.sigmas, std::move(st), watched, on_step); break;
    case Sampler::EulerAncestral: {
      std::vector<std::unique_ptr<sampling::TorchCpuGenerator>> gens;
      std::vector<sampling::NoiseSource*> sources;
      for (const StageSample& s : samples) {
        gens.push_back(std::make_unique<sampling::TorchCpuGenerator>(s.ancestral_seed));
        sources.push_back(gens.back().get());
      }
      PerSampleNoise gen(sources);
      sampling::AncestralLoopOptions opt;
      opt.model_dtype = c.dtype;
      opt.on_step = on_step;
      const sampling::EulerAncestralStep step{c.ancestral_eta, sampling::kAncestralSNoise};
      st = sampling::euler_ancestral_loop(c.sigmas, std::move(st), watched, step, gen, opt);
      break;
    }
    case Sampler::Res2s: {
      sampling::Res2sLoopOptions opt;
      opt.model_dtype = c.dtype;
      opt.on_step = on_step;
      st = sampling::res2s_loop(c.sigmas, std::move(st), watched, sampling::kRes2sDefaultNoiseSeed, opt);
      break;
    }
  }
  watch_states(st, str("after the last step, ", total, " of ", total));
  watch.finish();

  st = sampling::on_device(st, Device::cpu());
  std::vector<StageOutput> outs;
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto one = [&](const LatentState& s) {
      return samples.size() == 1 ? s : sample_of(s, static_cast<int64_t>(i));
    };
    StageOutput out;
    if (st.video) {
      const LatentState cleared = vt.clear_conditioning(one(*st.video));
      out.video_latent = vt.unpatchify(cleared).latent;
      out.generated_keyframes = cleared.generated_keyframes;
      if (cleared.generated_keyframe_layout)
        out.generated_keyframe_positions = cleared.generated_keyframe_layout->pixel_frame_indices;
    }
    if (st.audio) out.audio_latent = at.unpatchify(at.clear_conditioning(one(*st.audio))).latent;
    outs.push_back(std::move(out));
  }
  return outs;
}

}  // namespace ltx::pipelines
