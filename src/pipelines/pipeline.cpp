#include "pipelines/pipeline.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include "core/error.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "ops/shape.h"
#include "pipelines/a2vid.h"
#include "pipelines/denoisers.h"
#include "pipelines/dfr.h"
#include "pipelines/dubit.h"
#include "pipelines/hdr_ic_lora.h"
#include "pipelines/keyframe_interpolation.h"
#include "pipelines/retake.h"
#include "pipelines/ic_lora.h"
#include "pipelines/stages.h"
#include "pipelines/t2a.h"
#include "sampling/params.h"
#include "sampling/schedulers.h"

namespace ltx::pipelines {

namespace {

constexpr PipelineKind kAllKinds[] = {PipelineKind::Distilled,  PipelineKind::OneStage,
                                      PipelineKind::TwoStage,   PipelineKind::TwoStageHQ,
                                      PipelineKind::Dfr,        PipelineKind::KeyframeInterpolation,
                                      PipelineKind::Retake,     PipelineKind::A2Vid,
                                      PipelineKind::T2A,        PipelineKind::IcLora,
                                      PipelineKind::DubIt,      PipelineKind::HdrIcLora};

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
    case PipelineKind::KeyframeInterpolation: return "keyframe-interpolation";
    case PipelineKind::Retake: return "retake";
    case PipelineKind::A2Vid: return "a2vid";
    case PipelineKind::T2A: return "t2a";
    case PipelineKind::IcLora: return "ic-lora";
    case PipelineKind::DubIt: return "dubit";
    case PipelineKind::HdrIcLora: return "hdr-ic-lora";
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

bool is_two_stage(PipelineKind kind) {
  return kind != PipelineKind::OneStage && kind != PipelineKind::Retake && kind != PipelineKind::T2A;
}
bool makes_video(PipelineKind kind) { return kind != PipelineKind::T2A; }
bool uses_guidance(PipelineKind kind) {
  return kind != PipelineKind::Distilled && kind != PipelineKind::Dfr && kind != PipelineKind::Retake &&
         kind != PipelineKind::IcLora && kind != PipelineKind::DubIt && kind != PipelineKind::HdrIcLora;
}

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
    case PipelineKind::TwoStage:
    case PipelineKind::KeyframeInterpolation: r.distilled_lora_strengths = {0.0, 1.0}; break;
    case PipelineKind::A2Vid: r.distilled_lora_strengths = {0.0, 1.0}; break;
    case PipelineKind::TwoStageHQ: r.distilled_lora_strengths = {0.25, 0.5}; break;
    case PipelineKind::Dfr: r.distilled_lora_strengths = {1.0, 1.0}; break;
    default: r.distilled_lora_strengths = {0.0, 0.0}; break;
  }
  if (kind == PipelineKind::HdrIcLora) {
    // hdr_ic_lora.py's DEFAULT_NUM_FRAMES; video only (the size and rate are the clip's).
    r.num_frames = 161;
    r.audio = false;
  }
  if (kind == PipelineKind::T2A) {
    // Audio only: no video stream, so the video -> audio modality guidance is off (its CLI passes
    // modality_scale 1.0).
    r.video_guider = sampling::GuiderParams{};
    r.audio_guider.modality_scale = 1.0;
  }
  if (!uses_guidance(kind)) {
    // The distilled, DFR and retake pipelines run the conditioned pass only.
    r.video_guider = sampling::GuiderParams{};
    r.audio_guider = sampling::GuiderParams{};
  }
  return r;
}

std::optional<double> distilled_lora_strength(PipelineKind kind, Stage stage, const GenerationRequest& request) {
  const double s = request.distilled_lora_strengths[stage == Stage::One ? 0 : 1];
  switch (kind) {
    case PipelineKind::TwoStage:
    case PipelineKind::KeyframeInterpolation:
    case PipelineKind::A2Vid: return stage == Stage::Two ? std::optional<double>(s) : std::nullopt;
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

void validate_request(PipelineKind kind, const GenerationRequest& request, const Components& c,
                      const TextContexts* contexts) {
  const char* name = pipeline_name(kind);
  if (request.step_cache.enabled()) {
    request.step_cache.validate();
    LTX_CHECK(uses_guidance(kind), "--cache ", models::transformer::step_cache_mode_name(request.step_cache.mode),
              ": the ", name, " pipeline runs only distilled stages (8 steps or fewer), where step caching has "
              "nothing to skip; it applies to the guided pipelines (one-stage, two-stage, two-stage-hq, "
              "keyframe-interpolation, a2vid, t2a): use --cache none");
    LTX_CHECK(request.max_batch_size == 0, "--cache decides once per step for all guidance passes, which needs them in "
              "one transformer call; drop --max-batch-size ", request.max_batch_size, " or use --cache none");
  }
  // Retake runs at its source clip's size: the checks below see that size.
  if (kind == PipelineKind::Retake) validate_retake_source(request, &c);
  LTX_CHECK(kind == PipelineKind::Retake || !request.retake, "pipeline ", name,
            ": a source clip (--video-path) is a retake option (--pipeline retake)");
  if (kind == PipelineKind::T2A) return validate_t2a_request(request, c, contexts);
  if (kind == PipelineKind::HdrIcLora) return hdr_ic_lora::validate_request(request, c, contexts);
  // DubIt takes its frame count and rate from the reference clip.
  LTX_CHECK(kind == PipelineKind::DubIt || !request.dubit, "pipeline ", name,
            ": a reference clip (--reference-video) is a DubIt option (--pipeline dubit)");
  if (kind == PipelineKind::DubIt) validate_dubit_reference(request);
  const GenerationRequest& r = kind == PipelineKind::Retake  ? with_retake_shape(request)
                               : kind == PipelineKind::DubIt ? with_dubit_shape(request)
                                                             : request;
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
    if (im.image.defined()) {
      LTX_CHECK(im.image.dim() == 3 && im.image.size(2) == 3 &&
                    (im.image.dtype() == DType::U8 || im.image.dtype() == DType::F32),
                "pipeline ", name, ": image ", i, " pixels must be u8 [H, W, 3] (or an EXR still's f32), got ",
                dtype_name(im.image.dtype()), " ", im.image.shape().str());
      LTX_CHECK(im.image.dtype() == DType::U8 || r.hdr, "pipeline ", name, ": image ", i,
                " is an EXR still: EXR input requires --hdr ", media::hdr_color_space_choices(),
                " to declare the source colour space");
    }
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
  if (kind == PipelineKind::KeyframeInterpolation || kind == PipelineKind::Retake)
    LTX_CHECK(!keyframes, "pipeline ", name, ": generated keyframes are not an option of this pipeline");
  if (kind == PipelineKind::Retake)
    LTX_CHECK(r.images.empty(), "pipeline ", name, ": retake takes no --image (it conditions on the source clip)");
  if (kind == PipelineKind::A2Vid) validate_a2vid_request(r, c);
  if (kind == PipelineKind::IcLora) {
    validate_ic_lora_request(r, c);
  } else if (kind == PipelineKind::DubIt) {
    validate_dubit_request(r, c);
  } else {
    LTX_CHECK(r.video_conditionings.empty() && !r.conditioning_attention_mask.defined() && !r.skip_stage_2,
              "pipeline ", name, ": reference videos, an attention mask and skipping stage 2 are IC-LoRA options "
              "(--pipeline ic-lora)");
  }
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

namespace {

// The contexts moved to the transformer's device once (the denoisers hand them to it).
TextContexts contexts_on(const TextContexts& in, Device device) {
  TextContexts ctx = in;
  for (Tensor* t : {&ctx.video_positive, &ctx.audio_positive, &ctx.video_negative, &ctx.audio_negative})
    if (t->defined()) *t = t->to(device);
  return ctx;
}

// One context of every sample joined along the batch ([B, L, D]); undefined when sample 0 has none.
Tensor joined_context(const std::vector<TextContexts>& ctx, Tensor TextContexts::*field, const char* name) {
  if (ctx.size() == 1) return ctx.front().*field;
  const bool defined = (ctx.front().*field).defined();
  std::vector<Tensor> parts;
  for (size_t i = 0; i < ctx.size(); ++i) {
    const Tensor& t = ctx[i].*field;
    LTX_CHECK(t.defined() == defined, "pipeline batch: sample ", i, (defined ? " lacks" : " has"), " the ", name,
              " context that sample 0 ", (defined ? "has" : "lacks"));
    if (!defined) continue;
    LTX_CHECK(t.dim() == 3 && t.size(0) == 1 && t.shape() == (ctx.front().*field).shape(), "pipeline batch: sample ",
              i, "'s ", name, " context is ", t.shape().str(), ", sample 0's ", (ctx.front().*field).shape().str(),
              "; a batch needs [1, L, D] contexts of one text encoder");
    parts.push_back(t);
  }
  return defined ? ops::concat(parts, 0) : Tensor();
}

// The distilled, one-stage, two-stage and HQ pipelines over one or more requests of one batch_key
// in one denoising run per stage; everything per sample (noise, images, contexts, guidance scales)
// is kept per sample, so each result is the one its request gets alone.
std::vector<GenerationResult> run_standard_batch(PipelineKind kind, const std::vector<GenerationRequest>& reqs,
                                                 const Components& c, const std::vector<TextContexts>& ctx,
                                                 const ProgressCallback& progress) {
  const GenerationRequest& r = reqs.front();
  const size_t n = reqs.size();
  const bool two_stage = is_two_stage(kind);

  // One generator per sample for its whole run: stage-1 video, stage-1 audio, stage-2 video, audio.
  std::vector<std::unique_ptr<sampling::TorchCpuGenerator>> seeded;
  std::vector<sampling::NoiseSource*> noise;
  for (const GenerationRequest& q : reqs) {
    seeded.push_back(std::make_unique<sampling::TorchCpuGenerator>(q.seed));
    noise.push_back(q.noise ? q.noise : seeded.back().get());
  }
  const Tensor video_pos = joined_context(ctx, &TextContexts::video_positive, "positive video");
  // The negative contexts only when every sample has them: validate_request made sure that the
  // samples whose guidance runs the uncond pass have them, and batch_key that all or none run it.
  const auto all_have = [&](Tensor TextContexts::*field) {
    return std::all_of(ctx.begin(), ctx.end(), [&](const TextContexts& t) { return (t.*field).defined(); });
  };
  const Tensor video_neg = all_have(&TextContexts::video_negative)
                               ? joined_context(ctx, &TextContexts::video_negative, "negative video")
                               : Tensor();
  const Tensor audio_pos = r.audio ? joined_context(ctx, &TextContexts::audio_positive, "positive audio") : Tensor();
  const Tensor audio_neg = r.audio && all_have(&TextContexts::audio_negative)
                               ? joined_context(ctx, &TextContexts::audio_negative, "negative audio")
                               : Tensor();

  const models::transformer::LTXModel& model1 = stage_model(c, Stage::One);
  StageConfig s1 = first_stage_config(r, c, model1, two_stage ? r.height / 2 : r.height,
                                      two_stage ? r.width / 2 : r.width, r.num_frames);

  // Images: read + CRF once per sample, then resized and encoded per stage.
  std::vector<std::vector<PreparedImage>> images(n);
  bool any_images = false;
  for (const GenerationRequest& q : reqs) any_images = any_images || !q.images.empty();
  if (any_images && progress) progress("image conditioning", 0, 1);
  for (size_t i = 0; i < n; ++i)
    if (!reqs[i].images.empty())
      images[i] = prepare_images(reqs[i].images,
                                 static_cast<int>(sampling::detect_params(c.model_version).default_image_crf),
                                 reqs[i].hdr);
  auto conditionings = [&](size_t i, int64_t h, int64_t w) {
    return images[i].empty() ? sampling::ConditioningItems{}
                             : image_conditionings(images[i], h, w, *c.video_encoder, reqs[i].dtype, c.device);
  };

  std::vector<StageSample> samples1(n);
  for (size_t i = 0; i < n; ++i) {
    samples1[i].video = ModalityInput{};
    samples1[i].video->conditionings = conditionings(i, s1.height, s1.width);
    samples1[i].noise = noise[i];
    if (r.audio) samples1[i].audio = ModalityInput{};
  }
  if (any_images && progress) progress("image conditioning", 1, 1);
  // Generated keyframes: stage 1 only (their effect is baked into the stage-1 latent).
  for (size_t i = 0; i < n; ++i) {
    const GenerationRequest& q = reqs[i];
    const std::vector<int64_t> keyframe_positions =
        resolve_generated_keyframes(q.num_generated_keyframes, q.generated_keyframe_positions, q.num_frames);
    if (keyframe_positions.empty()) continue;
    require_keyframe_embedding(model1.config(), pipeline_name(kind));
    samples1[i].video->conditionings.push_back(
        std::make_shared<sampling::VideoGeneratedKeyframeSlots>(keyframe_positions));
  }

  std::vector<StageOutput> out1;
  std::vector<StepCacheReport> stage1_cache;
  if (kind == PipelineKind::Distilled) {
    s1.sigmas = sigmas_or(r.stage_1_sigmas, sampling::distilled_sigmas());
    if (sampling::use_ancestral_sampler(c.model_version)) {
      s1.sampler = Sampler::EulerAncestral;
      for (size_t i = 0; i < n; ++i) samples1[i].ancestral_seed = reqs[i].seed + sampling::kAncestralNoiseSeedOffset;
    }
    const SimpleDenoiser d(model1, video_pos, audio_pos);
    out1 = run_diffusion_stage_batch(s1, samples1, d.callback(), progress);
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
    GuidedDenoiser d(model1, {video_pos, video_neg}, {audio_pos, audio_neg}, r.video_guider, r.audio_guider);
    d.set_max_batch_size(r.max_batch_size);
    d.set_step_cache(r.step_cache);
    if (n > 1) {
      std::vector<sampling::GuiderParams> vg, ag;
      for (const GenerationRequest& q : reqs) {
        vg.push_back(q.video_guider);
        ag.push_back(q.audio_guider);
      }
      d.set_sample_guiders(std::move(vg), std::move(ag));
    }
    out1 = run_diffusion_stage_batch(s1, samples1, d.callback(), progress);
    if (const models::transformer::StepCache* cache = d.step_cache())
      stage1_cache.push_back({"stage 1", cache->computed(), cache->reused()});
  }

  std::vector<GenerationResult> res(n);
  for (size_t i = 0; i < n; ++i) {
    res[i].height = r.height;
    res[i].width = r.width;
    res[i].num_frames = r.num_frames;
    res[i].frame_rate = r.frame_rate;
    res[i].generated_keyframes = out1[i].generated_keyframes;
    res[i].generated_keyframe_positions = out1[i].generated_keyframe_positions;
    res[i].step_cache = stage1_cache;
    if (!two_stage) {
      res[i].video_latent = out1[i].video_latent;
      res[i].audio_latent = out1[i].audio_latent;
    }
  }
  if (!two_stage) return res;

  // Stage 2: upsample x2 in latent space (per sample), renoise to the first stage-2 sigma, refine.
  if (progress) progress("upsample", 0, 1);
  std::vector<Tensor> upscaled;
  for (size_t i = 0; i < n; ++i)
    upscaled.push_back(upsample_on_device(out1[i].video_latent.narrow(0, 0, 1), latent_statistics(c),
                                          *c.spatial_upsampler, r.dtype, c.device));
  if (progress) progress("upsample", 1, 1);

  const models::transformer::LTXModel& model2 = stage_model(c, Stage::Two);
  std::vector<StageSample> samples2(n);
  StageConfig s2config;
  for (size_t i = 0; i < n; ++i) {
    RefinementStage s2 = refinement_stage(s1, reqs[i], model2, upscaled[i], out1[i].audio_latent);
    s2.config.sampler = kind == PipelineKind::TwoStageHQ ? Sampler::Res2s : Sampler::Euler;
    s2.video.conditionings = conditionings(i, s2.config.height, s2.config.width);
    samples2[i].video = std::move(s2.video);
    samples2[i].audio = std::move(s2.audio);
    samples2[i].noise = noise[i];
    s2config = std::move(s2.config);
  }
  const SimpleDenoiser d2(model2, video_pos, audio_pos);
  const std::vector<StageOutput> out2 = run_diffusion_stage_batch(s2config, samples2, d2.callback(), progress);

  for (size_t i = 0; i < n; ++i) {
    res[i].video_latent = out2[i].video_latent;
    // The distilled pipeline keeps the refined audio; the two-stage ones keep stage 1's.
    res[i].audio_latent = kind == PipelineKind::Distilled ? out2[i].audio_latent : out1[i].audio_latent;
  }
  return res;
}

// Appends `v` to a batch key in a form that keeps every bit of a double.
void key_double(std::string& k, double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a", v);
  k += buf;
}

void key_guider(std::string& k, const char* name, const sampling::GuiderParams& g) {
  // The passes a guider runs (plan_guidance), not its scales: those stay per sample.
  const sampling::MultiModalGuider m(g);
  k += std::string(";") + name + ":uncond=" + (m.do_unconditional_generation() ? "1" : "0") +
       ",stg=" + (m.do_perturbed_generation() ? "1" : "0") + ",mod=" + (m.do_isolated_modality_generation() ? "1" : "0") +
       ",skip_step=" + std::to_string(g.skip_step) + ",stg_blocks=";
  for (int b : g.stg_blocks) k += std::to_string(b) + ".";
}

}  // namespace

GenerationResult run_pipeline(PipelineKind kind, const GenerationRequest& r, const Components& c,
                              const TextContexts& ctx_in, const ProgressCallback& progress) {
  validate_request(kind, r, c, &ctx_in);
  const TextContexts ctx = contexts_on(ctx_in, c.device);
  if (kind == PipelineKind::Dfr) return run_dfr(r, c, ctx, progress);
  if (kind == PipelineKind::KeyframeInterpolation) return run_keyframe_interpolation(r, c, ctx, progress);
  if (kind == PipelineKind::Retake) return run_retake(r, c, ctx, progress);
  if (kind == PipelineKind::A2Vid) return run_a2vid(r, c, ctx, progress);
  if (kind == PipelineKind::T2A) return run_t2a(r, c, ctx, progress);
  if (kind == PipelineKind::IcLora) return run_ic_lora(r, c, ctx, progress);
  if (kind == PipelineKind::DubIt) return run_dubit(r, c, ctx, progress);
  LTX_CHECK(kind != PipelineKind::HdrIcLora, "pipeline hdr-ic-lora: its latent needs the HDR LoRA's "
            "metadata and an HDR decode; run it with hdr_ic_lora::run_hdr_ic_lora");
  return std::move(run_standard_batch(kind, {r}, c, {ctx}, progress).front());
}

bool supports_batching(PipelineKind kind) {
  // HQ's res_2s draws its step noise from one fixed seed for the whole batch, not per sample; DFR
  // plans its canvas per request.
  return kind == PipelineKind::Distilled || kind == PipelineKind::OneStage || kind == PipelineKind::TwoStage;
}

std::string batch_key(PipelineKind kind, const GenerationRequest& r, const std::string& models) {
  std::string k = std::string("pipeline=") + pipeline_name(kind) + ";size=" + std::to_string(r.width) + "x" +
                  std::to_string(r.height) + ";frames=" + std::to_string(r.num_frames) + ";fps=";
  key_double(k, r.frame_rate);
  k += ";steps=" + std::to_string(r.num_inference_steps) + ";dtype=" + dtype_name(r.dtype) +
       ";audio=" + (r.audio ? "1" : "0");
  for (const auto& [name, sigmas] : {std::pair{"sigmas1", &r.stage_1_sigmas}, std::pair{"sigmas2", &r.stage_2_sigmas}}) {
    if (!*sigmas) continue;
    k += std::string(";") + name + "=";
    for (float s : **sigmas) {
      key_double(k, static_cast<double>(s));
      k += ",";
    }
  }
  key_guider(k, "video", r.video_guider);
  key_guider(k, "audio", r.audio_guider);
  // The images' token layout and denoise-mask levels (frame index, strength); the pixels stay per sample.
  k += ";images=";
  for (const ImageConditioning& im : r.images) {
    k += std::to_string(im.frame_index) + "@";
    key_double(k, im.strength);
    k += ",";
  }
  k += ";keyframes=" + std::to_string(r.num_generated_keyframes) + ":";
  for (int64_t p : r.generated_keyframe_positions) k += std::to_string(p) + ",";
  k += ";distilled_lora=";
  key_double(k, r.distilled_lora_strengths[0]);
  k += ",";
  key_double(k, r.distilled_lora_strengths[1]);
  k += ";cache=" + r.step_cache.str();
  if (r.step_cache.enabled()) key_double(k, r.step_cache.threshold);
  k += ";models=" + models;
  return k;
}

std::vector<GenerationResult> run_pipeline_batch(PipelineKind kind, std::span<const GenerationRequest> requests,
                                                 const Components& c, std::span<const TextContexts> contexts,
                                                 const ProgressCallback& progress) {
  LTX_CHECK(!requests.empty(), "pipeline batch: no requests");
  LTX_CHECK(requests.size() == contexts.size(), "pipeline batch: ", requests.size(), " requests but ", contexts.size(),
            " text contexts; give one per request");
  if (requests.size() == 1) return {run_pipeline(kind, requests.front(), c, contexts.front(), progress)};
  LTX_CHECK(supports_batching(kind), "pipeline ", pipeline_name(kind),
            " runs one request at a time (supports_batching is false); run its jobs one by one");
  const std::string key = batch_key(kind, requests.front());
  std::vector<GenerationRequest> reqs;
  std::vector<TextContexts> ctx;
  for (size_t i = 0; i < requests.size(); ++i) {
    validate_request(kind, requests[i], c, &contexts[i]);
    LTX_CHECK(batch_key(kind, requests[i]) == key, "pipeline batch: request ", i, " cannot share a run with request 0 ",
              "(batch keys differ: ", batch_key(kind, requests[i]), " vs ", key, ")");
    reqs.push_back(requests[i]);
    ctx.push_back(contexts_on(contexts[i], c.device));
  }
  return run_standard_batch(kind, reqs, c, ctx, progress);
}

}  // namespace ltx::pipelines
