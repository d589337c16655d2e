#pragma once
// The transformer-backed denoisers (reference: ltx_pipelines/utils/denoisers.py): they turn a
// sampling::Denoiser call (states + sigma) into X0Model calls. SimpleDenoiser runs the conditioned
// pass only; GuidedDenoiser batches every guidance pass of the step (cond, uncond, perturbed,
// isolated-modality; sampling::plan_guidance) into ONE transformer call and combines them with each
// modality's MultiModalGuider.
#include <cstdint>
#include <optional>
#include <vector>

#include "models/transformer/model.h"
#include "sampling/guiders.h"
#include "sampling/latent.h"
#include "sampling/loops.h"

namespace ltx::pipelines {

// How modality_from_state hands over the timesteps (denoise_mask * sigma, f32).
enum class TimestepForm {
  // [B, 1, 1] when every sample's mask is one value known on the host (no conditioning tokens:
  // text-to-video, and any frozen state), else [B, T, 1]. The transformer then forms its AdaLN
  // values once per sample instead of once per token (the same values: every token's row of the
  // AdaLN input is equal), and its glue reads [B, 1, D] rows instead of [B, T, D] tensors. Masks
  // of a few runs known on the host (an image at frame 0, a few keyframes) keep [B, T, 1] and add
  // Modality::timestep_runs: the AdaLN linears then run once per run and are expanded per token.
  PerSampleWhenUniform,
  // Always [B, T, 1], as the reference builds them (an A/B for `ltx bench`).
  PerToken,
};

// modality_from_latent_state: latent, positions, masks of `state`; sigma [B] (0 for a frozen
// state); timesteps = denoise_mask * sigma (f32) in the given form.
models::transformer::Modality modality_from_state(const sampling::LatentState& state, const Tensor& context,
                                                  double sigma, bool enabled = true,
                                                  TimestepForm form = TimestepForm::PerSampleWhenUniform);

// Positive (and, for guidance, negative) text context of one modality, [B, L, D] each.
struct ModalityContext {
  Tensor positive;
  Tensor negative;  // undefined: none (an unconditional pass then throws)
};

// SimpleDenoiser: x0 = X0Model(model)(video, audio) with the positive contexts.
class SimpleDenoiser {
 public:
  SimpleDenoiser(const models::transformer::LTXModel& model, Tensor video_context, Tensor audio_context)
      : model_(model), video_context_(std::move(video_context)), audio_context_(std::move(audio_context)) {}
  sampling::DenoiseOutput operator()(const sampling::LatentState* video, const sampling::LatentState* audio,
                                     const std::vector<double>& sigmas, int64_t step_index) const;
  // A callback for the sampling loops (refers to this object: keep it alive while the loop runs).
  sampling::Denoiser callback() const;
  // The text K / V kept across steps where no prompt timestep modulates them (19B,
  // use_prompt_adaln_single=false; text_kv_cache.h). Same values as computing them per step.
  const models::transformer::TextKvCache& text_kv_cache() const { return text_kv_cache_; }

 private:
  const models::transformer::LTXModel& model_;
  Tensor video_context_, audio_context_;
  mutable models::transformer::TextKvCache text_kv_cache_;  // filled by the const step
};

// GuidedDenoiser / FactoryGuidedDenoiser. Guiders come from factories looked up by the step's sigma
// (a constant factory is the static GuidedDenoiser): the video guider from `video`, the audio
// guider from `audio`, else from `video`; a missing factory means the positive-only guider. As the
// reference's factory denoiser, the sigma list of the FIRST call is cached and indexed by
// step_index afterwards. Stateful: a guider's skip_step reuses the last denoised result, so use
// a fresh instance per denoising loop.
class GuidedDenoiser {
 public:
  GuidedDenoiser(const models::transformer::LTXModel& model, ModalityContext video_context,
                 ModalityContext audio_context, std::optional<sampling::MultiModalGuiderFactory> video,
                 std::optional<sampling::MultiModalGuiderFactory> audio, bool force_uncond_pass = false);
  // Static guiders (the reference's GuidedDenoiser).
  GuidedDenoiser(const models::transformer::LTXModel& model, ModalityContext video_context,
                 ModalityContext audio_context, const sampling::GuiderParams& video,
                 const sampling::GuiderParams& audio, bool force_uncond_pass = false);

  sampling::DenoiseOutput operator()(const sampling::LatentState* video, const sampling::LatentState* audio,
                                     const std::vector<double>& sigmas, int64_t step_index);
  sampling::Denoiser callback();  // refers to this object

  // At most this many samples per transformer call (the reference's BatchSplitAdapter
  // max_batch_size): the batched passes run in consecutive chunks, which bounds activation memory
  // at the cost of smaller GEMMs. 0 (default): all passes in one call.
  void set_max_batch_size(int64_t max_batch_size) { max_batch_size_ = max_batch_size; }

  // Whether the passes that read the same prompt (cond, perturbed, isolated modality: all but
  // uncond) compute their text cross-attention K / V once (Modality::context_groups), and, where
  // no prompt timestep modulates them (19B, use_prompt_adaln_single=false), once per loop (the
  // text K / V cache, text_kv_cache.h). Default on; off recomputes them per pass and step, as
  // the reference does (same values; for A/B timing).
  void set_share_text_kv(bool share) { share_text_kv_ = share; }
  const models::transformer::TextKvCache& text_kv_cache() const { return text_kv_cache_; }

  // Per-sample guiders for a batch of several jobs (one entry per sample of the states, in order;
  // each sample then combines its passes with its own scales, as its solo run does). Every
  // sample's guiders must run the same passes at every step (pipelines::batch_key); a step where
  // they do not throws. Empty (default): the constructor's guiders for every sample.
  void set_sample_guiders(std::vector<sampling::GuiderParams> video, std::vector<sampling::GuiderParams> audio);

  // The timesteps' form (TimestepForm; default per sample where the masks allow it).
  void set_timestep_form(TimestepForm form) { timestep_form_ = form; }

  // Steps that ran the transformer so far (every step unless all guiders skipped it; a step run
  // in chunks counts once).
  int64_t transformer_calls() const { return calls_; }

  // Step caching (models/transformer/step_cache.h; mode none: off, the default). The first
  // params.warmup_steps steps and the last step compute every block; the res_2s midpoint calls
  // count as the step they belong to. Needs every pass in one transformer call (no
  // set_max_batch_size below the batch): the decision is one per step for all passes.
  void set_step_cache(const models::transformer::StepCacheParams& params);
  // The loop's cache, or null when off (its computed() / reused() calls).
  const models::transformer::StepCache* step_cache() const { return step_cache_ ? &*step_cache_ : nullptr; }

 private:
  const models::transformer::LTXModel& model_;
  ModalityContext video_context_, audio_context_;
  std::optional<sampling::MultiModalGuiderFactory> video_factory_, audio_factory_;
  bool force_uncond_pass_;
  std::vector<sampling::GuiderParams> sample_video_guiders_, sample_audio_guiders_;
  std::optional<std::vector<double>> cached_sigmas_;
  Tensor last_video_, last_audio_;
  int64_t calls_ = 0;
  int64_t max_batch_size_ = 0;
  bool share_text_kv_ = true;
  TimestepForm timestep_form_ = TimestepForm::PerSampleWhenUniform;
  models::transformer::TextKvCache text_kv_cache_;
  std::optional<models::transformer::StepCache> step_cache_;
  int64_t last_step_ = 0;  // the step index of the last call with a schedule (res_2s midpoints)
};

}  // namespace ltx::pipelines
