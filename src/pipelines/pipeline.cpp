#include "pipelines/pipeline.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/denoisers.h"
#include "pipelines/dfr.h"
#include "pipelines/stages.h"
#include "sampling/params.h"
#include "sampling/schedulers.h"

namespace ltx::pipelines {

namespace {

constexpr PipelineKind kAllKinds[] = {PipelineKind::Distilled, PipelineKind::OneStage, PipelineKind::TwoStage,
                                      PipelineKind::TwoStageHQ, PipelineKind::Dfr};

std::string names_joined() {
  std::string s;
  for (const auto& n : pipeline_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

const char* pipeline_name(PipelineKind kind) {
  switch (kind) {
    case PipelineKind::Distilled: return "distilled";
    case PipelineKind::OneStage: return "one-stage";
    case PipelineKind::TwoStage: return "two-stage";
    case PipelineKind::TwoStageHQ: return "two-stage-hq";
    case PipelineKind::Dfr: return "dfr";
  }
  return "?";
}

std::vector<std::string> pipeline_names() {
  std::vector<std::string> out;
  for (PipelineKind k : kAllKinds) out.emplace_back(pipeline_name(k));
  return out;
}

PipelineKind parse_pipeline_kind(const std::string& name) {
  std::string n = name;
  for (char& c : n) c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (PipelineKind k : kAllKinds)
    if (n == pipeline_name(k)) return k;
  fail("unknown pipeline '", name, "': expected one of ", names_joined());
}

bool is_two_stage(PipelineKind kind) { return kind != PipelineKind::OneStage; }
bool uses_guidance(PipelineKind kind) { return kind != PipelineKind::Distilled && kind != PipelineKind::Dfr; }

GenerationRequest default_request(PipelineKind kind, const std::string& model_version) {
  const sampling::PipelineParams& p =
      kind == PipelineKind::TwoStageHQ ? sampling::ltx_2_3_hq_params() : sampling::detect_params(model_version);
  GenerationRequest r;
  r.seed = p.seed;
  r.num_frames = p.num_frames;
  r.frame_rate = p.frame_rate;
  r.num_inference_steps = p.num_inference_steps;
  r.video_guider = p.video_guider;
  r.audio_guider = p.audio_guider;
  if (is_two_stage(kind)) {
    r.height = p.stage_2_height();
    r.width = p.stage_2_width();
  } else {
    r.height = p.stage_1_height;
    r.width = p.stage_1_width;
  }
  switch (kind) {
    case PipelineKind::TwoStage: r.distilled_lora_strengths = {0.0, 1.0}; break;
    case PipelineKind::TwoStageHQ: r.distilled_lora_strengths = {0.25, 0.5}; break;
    case PipelineKind::Dfr: r.distilled_lora_strengths = {1.0, 1.0}; break;
    default: r.distilled_lora_strengths = {0.0, 0.0}; break;
  }
  if (!uses_guidance(kind)) {
    // The distilled and DFR pipelines run the conditioned pass only.
    r.video_guider = sampling::GuiderParams{};
    r.audio_guider = sampling::GuiderParams{};
  }
  return r;
}

std::optional<double> distilled_lora_strength(PipelineKind kind, Stage stage, const GenerationRequest& request) {
  const double s = request.distilled_lora_strengths[stage == Stage::One ? 0 : 1];
  switch (kind) {
    case PipelineKind::TwoStage: return stage == Stage::Two ? std::optional<double>(s) : std::nullopt;
    case PipelineKind::TwoStageHQ: return s;
    case PipelineKind::Dfr:  // the temporal rounds run stage 1's weights
      return request.distilled_lora_strengths[stage == Stage::Two ? 1 : 0];
    default: return std::nullopt;
  }
}

std::optional<double> detailing_lora_strength(PipelineKind kind, Stage stage, const GenerationRequest& request) {
  if (kind != PipelineKind::Dfr || stage != Stage::Two) return std::nullopt;
  return request.detailing_lora_strength;
}

int64_t audio_samples_to_keep(const GenerationResult& result, int64_t total_samples, double sample_rate) {
  if (result.audio_max_seconds <= 0.0) return total_samples;
  const auto limit = static_cast<int64_t>(std::nearbyint(result.audio_max_seconds * sample_rate));
  return std::min(total_samples, limit);
}

void validate_request(PipelineKind kind, const GenerationRequest& r, const Components& c,
                      const TextContexts* contexts) {
  const char* name = pipeline_name(kind);
  LTX_CHECK(r.num_frames >= 1 && (r.num_frames - 1) % 8 == 0, "pipeline ", name, ": num_frames ", r.num_frames,
            " is not 8k + 1 (e.g. 9, 17, 25, ..., 121): pass --num-frames ", std::max<int64_t>(1, (r.num_frames - 1) / 8 * 8 + 1));
  const int64_t div = is_two_stage(kind) ? 64 : 32;
  LTX_CHECK(r.height > 0 && r.width > 0 && r.height % div == 0 && r.width % div == 0, "pipeline ", name,
            ": resolution ", r.height, "x", r.width, " (height x width) must be positive multiples of ", div,
            is_two_stage(kind) ? " for two-stage pipelines (stage 1 runs at half size)" : " for the one-stage pipeline");
  LTX_CHECK(r.frame_rate > 0 && std::isfinite(r.frame_rate), "pipeline ", name, ": frame rate ", r.frame_rate,
            " must be a positive number");
  if (uses_guidance(kind))
    LTX_CHECK(r.num_inference_steps >= 1 || r.stage_1_sigmas, "pipeline ", name, ": num_inference_steps ",
              r.num_inference_steps, " must be >= 1");
  for (const auto* s : {&r.stage_1_sigmas, &r.stage_2_sigmas}) {
    if (!*s) continue;
    LTX_CHECK((*s)->size() >= 2, "pipeline ", name, ": a sigma override needs at least 2 values (got ",
              (*s)->size(), ")");
  }
  LTX_CHECK(r.max_batch_size >= 0, "pipeline ", name, ": max batch size ", r.max_batch_size, " must be >= 0");
  LTX_CHECK(r.dtype == DType::BF16 || r.dtype == DType::F32, "pipeline ", name, ": latent dtype ",
            dtype_name(r.dtype), " is not supported (bf16 or f32)");
  for (size_t i = 0; i < r.images.size(); ++i) {
    const ImageConditioning& im = r.images[i];
    LTX_CHECK(im.frame_index >= 0 && im.frame_index < r.num_frames, "pipeline ", name, ": image ", i,
              " frame index ", im.frame_index, " is outside [0, ", r.num_frames, ")");
    LTX_CHECK(im.strength >= 0.0 && im.strength <= 1.0, "pipeline ", name, ": image ", i, " strength ",
              im.strength, " must be in [0, 1]");
    LTX_CHECK(im.image.defined() || !im.path.empty(), "pipeline ", name, ": image ", i,
              " has neither a path nor pixels");
    if (im.image.defined())
      LTX_CHECK(im.image.dim() == 3 && im.image.size(2) == 3 && im.image.dtype() == DType::U8, "pipeline ", name,
                ": image ", i, " pixels must be u8 [H, W, 3], got ", dtype_name(im.image.dtype()), " ",
                im.image.shape().str());
    LTX_CHECK(!im.crf || *im.crf >= 0, "pipeline ", name, ": image ", i, " CRF ", *im.crf, " must be >= 0");
  }
  // Components.
  LTX_CHECK(c.transformer || c.stage_transformer, "pipeline ", name,
            ": no transformer given (load one with --checkpoint-path or --transformer-path)");
  if (c.transformer && !c.stage_transformer) {
    const auto type = c.transformer->model_type();
    LTX_CHECK(models::transformer::is_video_enabled(type), "pipeline ", name,
              ": the transformer is audio-only; video generation needs an audio-video or video-only model");
    LTX_CHECK(!r.audio || type == models::transformer::LTXModelType::AudioVideo, "pipeline ", name,
              ": audio requested but the transformer is ", models::transformer::model_type_name(type),
              "; turn audio off or use an audio-video checkpoint");
  }
  if (!r.images.empty())
    LTX_CHECK(c.video_encoder, "pipeline ", name,
              ": image conditioning needs the video VAE encoder (pass --video-vae-path or a full checkpoint)");
  if (is_two_stage(kind)) {
    LTX_CHECK(c.spatial_upsampler, "pipeline ", name,
              ": the spatial upsampler is missing (pass --spatial-upsampler-path)");
    LTX_CHECK(c.video_encoder || c.latent_statistics, "pipeline ", name,
              ": the video VAE's per-channel latent statistics are needed to upsample (pass the video VAE)");
  }
  LTX_CHECK(r.num_generated_keyframes >= 0, "pipeline ", name, ": --num-generated-keyframes ",
            r.num_generated_keyframes, " must be >= 0");
  LTX_CHECK(r.num_generated_keyframes == 0 || r.generated_keyframe_positions.empty(), "pipeline ", name,
            ": give either a generated keyframe count or explicit positions, not both");
  const bool keyframes = r.num_generated_keyframes > 0 || !r.generated_keyframe_positions.empty();
  if (kind == PipelineKind::Dfr) {
    validate_dfr_request(r, c);
  } else {
    LTX_CHECK(r.temporal_upsample_rounds == 0, "pipeline ", name,
              ": temporal upsampling rounds are a DFR option (--pipeline dfr)");
    LTX_CHECK(!r.detailing_lora_strength, "pipeline ", name, ": a detailing LoRA is a DFR option (--pipeline dfr)");
    if (keyframes) {
      (void)resolve_generated_keyframes(r.num_generated_keyframes, r.generated_keyframe_positions, r.num_frames);
      if (c.transformer && !c.stage_transformer) require_keyframe_embedding(c.transformer->config(), name);
    }
  }
  if (contexts) {
    LTX_CHECK(contexts->video_positive.defined(), "pipeline ", name, ": the positive video context is missing");
    if (r.audio)
      LTX_CHECK(contexts->audio_positive.defined(), "pipeline ", name, ": the positive audio context is missing");
    if (uses_guidance(kind)) {
      if (sampling::MultiModalGuider(r.video_guider).do_unconditional_generation() ||
          sampling::MultiModalGuider(r.audio_guider).do_unconditional_generation()) {
        LTX_CHECK(contexts->video_negative.defined() && (!r.audio || contexts->audio_negative.defined()),
                  "pipeline ", name, ": CFG is on (scale != 1) but the negative prompt's contexts are missing");
      }
    }
  }
}

GenerationResult run_pipeline(PipelineKind kind, const GenerationRequest& r, const Components& c,
                              const TextContexts& ctx_in, const ProgressCallback& progress) {
  validate_request(kind, r, c, &ctx_in);
  // The denoisers hand the contexts to the transformer: move them to its device once.
  TextContexts ctx = ctx_in;
  for (Tensor* t : {&ctx.video_positive, &ctx.audio_positive, &ctx.video_negative, &ctx.audio_negative})
    if (t->defined()) *t = t->to(c.device);
  if (kind == PipelineKind::Dfr) return run_dfr(r, c, ctx, progress);
  const bool two_stage = is_two_stage(kind);

  // One generator for the whole run: stage-1 video, stage-1 audio, stage-2 video, stage-2 audio.
  sampling::TorchCpuGenerator seeded(r.seed);
  sampling::NoiseSource& noise = r.noise ? *r.noise : static_cast<sampling::NoiseSource&>(seeded);

  const models::transformer::LTXModel& model1 = stage_model(c, Stage::One);
  StageConfig s1 = first_stage_config(r, c, model1, two_stage ? r.height / 2 : r.height,
                                      two_stage ? r.width / 2 : r.width, r.num_frames);

  // Images: read + CRF once, then resized and encoded per stage.
  std::vector<PreparedImage> images;
  if (!r.images.empty()) {
    if (progress) progress("image conditioning", 0, 1);
    images = prepare_images(r.images, static_cast<int>(sampling::detect_params(c.model_version).default_image_crf));
  }
  auto conditionings = [&](int64_t h, int64_t w) {
    return images.empty() ? sampling::ConditioningItems{}
                          : image_conditionings(images, h, w, *c.video_encoder, r.dtype, c.device);
  };

  ModalityInput video1;
  video1.conditionings = conditionings(s1.height, s1.width);
  if (!images.empty() && progress) progress("image conditioning", 1, 1);
  // Generated keyframes: stage 1 only (their effect is baked into the stage-1 latent).
  const std::vector<int64_t> keyframe_positions =
      resolve_generated_keyframes(r.num_generated_keyframes, r.generated_keyframe_positions, r.num_frames);
  if (!keyframe_positions.empty()) {
    require_keyframe_embedding(model1.config(), pipeline_name(kind));
    video1.conditionings.push_back(std::make_shared<sampling::VideoGeneratedKeyframeSlots>(keyframe_positions));
  }
  std::optional<ModalityInput> audio1;
  if (r.audio) audio1 = ModalityInput{};
  const Tensor audio_ctx = r.audio ? ctx.audio_positive : Tensor();

  StageOutput out1;
  if (kind == PipelineKind::Distilled) {
    s1.sigmas = sigmas_or(r.stage_1_sigmas, sampling::distilled_sigmas());
    if (sampling::use_ancestral_sampler(c.model_version)) {
      s1.sampler = Sampler::EulerAncestral;
      s1.ancestral_seed = r.seed + sampling::kAncestralNoiseSeedOffset;
    }
    const SimpleDenoiser d(model1, ctx.video_positive, audio_ctx);
    out1 = run_diffusion_stage(s1, video1, audio1, d.callback(), noise, progress);
  } else {
    if (r.stage_1_sigmas) {
      s1.sigmas = *r.stage_1_sigmas;
    } else if (kind == PipelineKind::TwoStageHQ) {
      // The HQ pipeline shifts its schedule by the stage-1 latent's token count.
      const auto shape = sampling::VideoLatentShape::from_pixel_shape({1, s1.num_frames, s1.height, s1.width,
                                                                       s1.frame_rate}, s1.widths.video_channels, s1.scale);
      s1.sigmas = sampling::ltx2_schedule(r.num_inference_steps, shape.token_count());
    } else {
      s1.sigmas = sampling::ltx2_schedule(r.num_inference_steps);
    }
    if (kind == PipelineKind::TwoStageHQ) s1.sampler = Sampler::Res2s;
    GuidedDenoiser d(model1, {ctx.video_positive, ctx.video_negative},
                     {audio_ctx, r.audio ? ctx.audio_negative : Tensor()}, r.video_guider, r.audio_guider);
    d.set_max_batch_size(r.max_batch_size);
    out1 = run_diffusion_stage(s1, video1, audio1, d.callback(), noise, progress);
  }

  GenerationResult res;
  res.height = r.height;
  res.width = r.width;
  res.num_frames = r.num_frames;
  res.frame_rate = r.frame_rate;
  res.generated_keyframes = out1.generated_keyframes;
  res.generated_keyframe_positions = out1.generated_keyframe_positions;
  if (!two_stage) {
    res.video_latent = out1.video_latent;
    res.audio_latent = out1.audio_latent;
    return res;
  }

  // Stage 2: upsample x2 in latent space, renoise to the first stage-2 sigma, refine.
  if (progress) progress("upsample", 0, 1);
  const Tensor upscaled = upsample_on_device(out1.video_latent.narrow(0, 0, 1), latent_statistics(c),
                                             *c.spatial_upsampler, r.dtype, c.device);
  if (progress) progress("upsample", 1, 1);

  const models::transformer::LTXModel& model2 = stage_model(c, Stage::Two);
  RefinementStage s2 = refinement_stage(s1, r, model2, upscaled, out1.audio_latent);
  s2.config.sampler = kind == PipelineKind::TwoStageHQ ? Sampler::Res2s : Sampler::Euler;
  s2.video.conditionings = conditionings(s2.config.height, s2.config.width);
  const SimpleDenoiser d2(model2, ctx.video_positive, audio_ctx);
  const StageOutput out2 =
      run_diffusion_stage(s2.config, s2.video, s2.audio, d2.callback(), noise, progress);

  res.video_latent = out2.video_latent;
  // The distilled pipeline keeps the refined audio; the two-stage ones keep stage 1's.
  res.audio_latent = kind == PipelineKind::Distilled ? out2.audio_latent : out1.audio_latent;
  return res;
}

}  // namespace ltx::pipelines
