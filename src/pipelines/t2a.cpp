#include "pipelines/t2a.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "models/transformer/model.h"
#include "pipelines/denoisers.h"
#include "pipelines/stages.h"
#include "sampling/guiders.h"
#include "sampling/schedulers.h"

namespace ltx::pipelines {

namespace {
// T2AOneStagePipeline's placeholder pixel size: the audio latent only reads frames and fps.
constexpr int64_t kPlaceholderPixels = 512;
}  // namespace

void validate_t2a_request(const GenerationRequest& r, const Components& c, const TextContexts* contexts) {
  LTX_CHECK(r.num_frames >= 1 && (r.num_frames - 1) % 8 == 0, "pipeline t2a: num_frames ", r.num_frames,
            " is not 8k + 1 (the audio lasts num_frames / frame_rate seconds): pass --num-frames ",
            std::max<int64_t>(1, (r.num_frames - 1) / 8 * 8 + 1));
  LTX_CHECK(r.frame_rate > 0 && std::isfinite(r.frame_rate), "pipeline t2a: frame rate ", r.frame_rate,
            " must be a positive number");
  LTX_CHECK(r.num_inference_steps >= 1 || r.stage_1_sigmas, "pipeline t2a: num_inference_steps ",
            r.num_inference_steps, " must be >= 1");
  if (r.stage_1_sigmas)
    LTX_CHECK(r.stage_1_sigmas->size() >= 2, "pipeline t2a: a sigma override needs at least 2 values (got ",
              r.stage_1_sigmas->size(), ")");
  LTX_CHECK(r.max_batch_size >= 0, "pipeline t2a: max batch size ", r.max_batch_size, " must be >= 0");
  LTX_CHECK(r.dtype == DType::BF16 || r.dtype == DType::F32, "pipeline t2a: latent dtype ", dtype_name(r.dtype),
            " is not supported (bf16 or f32)");
  LTX_CHECK(r.images.empty(), "pipeline t2a: it generates audio only; image conditioning does not apply");
  LTX_CHECK(r.audio, "pipeline t2a: it generates audio only; audio cannot be turned off");
  LTX_CHECK(r.num_generated_keyframes == 0 && r.generated_keyframe_positions.empty() &&
                r.temporal_upsample_rounds == 0 && !r.detailing_lora_strength,
            "pipeline t2a: keyframe, temporal-upsampling and detailing options are video options");
  LTX_CHECK(c.transformer || c.stage_transformer, "pipeline t2a: no transformer given (load one with "
            "--checkpoint-path or --transformer-path)");
  if (c.transformer && !c.stage_transformer)
    LTX_CHECK(models::transformer::is_audio_enabled(c.transformer->model_type()), "pipeline t2a: the transformer is ",
              models::transformer::model_type_name(c.transformer->model_type()),
              "; text-to-audio needs an audio-video or audio-only checkpoint");
  if (contexts) {
    LTX_CHECK(contexts->audio_positive.defined(), "pipeline t2a: the positive audio context is missing");
    if (sampling::MultiModalGuider(r.audio_guider).do_unconditional_generation())
      LTX_CHECK(contexts->audio_negative.defined(),
                "pipeline t2a: CFG is on (scale != 1) but the negative prompt's audio context is missing");
  }
}

GenerationResult run_t2a(const GenerationRequest& r, const Components& c, const TextContexts& ctx,
                         const ProgressCallback& progress) {
  const models::transformer::LTXModel& model = stage_model(c, Stage::One);
  StageConfig s = first_stage_config(r, c, model, kPlaceholderPixels, kPlaceholderPixels, r.num_frames);
  s.sigmas = sigmas_or(r.stage_1_sigmas, sampling::ltx2_schedule(r.num_inference_steps));

  // FactoryGuidedDenoiser(v_context=None, audio factory): no video guider, the audio one built
  // from the audio params (its negative context: the negative prompt's audio encoding).
  GuidedDenoiser d(model, ModalityContext{}, ModalityContext{ctx.audio_positive, ctx.audio_negative}, std::nullopt,
                   sampling::MultiModalGuiderFactory::constant(r.audio_guider));
  d.set_max_batch_size(r.max_batch_size);
  d.set_step_cache(r.step_cache);

  sampling::TorchCpuGenerator seeded(r.seed);
  sampling::NoiseSource& noise = r.noise ? *r.noise : seeded;
  const StageOutput out = run_diffusion_stage(s, std::nullopt, ModalityInput{}, d.callback(), noise, progress);

  GenerationResult res;
  res.audio_latent = out.audio_latent;
  if (const models::transformer::StepCache* cache = d.step_cache())
    res.step_cache.push_back({"stage 1", cache->computed(), cache->reused()});
  res.num_frames = r.num_frames;
  res.frame_rate = r.frame_rate;
  return res;
}

}  // namespace ltx::pipelines
