#include "pipelines/denoisers.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "core/error.h"
#include "ops/shape.h"

namespace ltx::pipelines {

namespace mt = models::transformer;
using sampling::DenoisedLatent;
using sampling::DenoiseOutput;
using sampling::GuidancePass;
using sampling::LatentState;
using sampling::MultiModalGuider;

mt::Modality modality_from_state(const LatentState& state, const Tensor& context, double sigma, bool enabled,
                                 TimestepForm form) {
  const int64_t batch = state.batch();
  const double s = state.frozen ? 0.0 : sigma;
  const Device device = state.latent.device();
  mt::Modality m;
  m.latent = state.latent;
  m.sigma = Tensor::full({batch}, static_cast<float>(s), DType::F32, device);
  const std::optional<std::vector<sampling::MaskRuns>> runs =
      form == TimestepForm::PerSampleWhenUniform ? sampling::mask_runs(state) : std::nullopt;
  const std::optional<std::vector<float>> uniform = runs ? sampling::uniform_values(*runs) : std::nullopt;
  if (uniform) {
    // mask * sigma in f32, as timesteps_from_mask forms each token's value.
    std::vector<float> t(uniform->size());
    for (size_t i = 0; i < t.size(); ++i) t[i] = (*uniform)[i] * static_cast<float>(s);
    m.timesteps = Tensor::from_vector(t, {batch, 1, 1}).to(device);
  } else {
    m.timesteps = sampling::timesteps_from_mask(state.denoise_mask, s);
    if (runs) {
      for (const sampling::MaskRuns& sample : *runs) {
        std::vector<int64_t> lengths;
        for (const sampling::MaskRun& run : sample) lengths.push_back(run.length);
        m.timestep_runs.push_back(std::move(lengths));
      }
    }
  }
  m.positions = state.positions;
  m.context = context;
  m.enabled = enabled;
  m.attention_mask = state.attention_mask;
  m.keyframes_mask = state.keyframes_mask;
  return m;
}

DenoiseOutput SimpleDenoiser::operator()(const LatentState* video, const LatentState* audio,
                                         const std::vector<double>& sigmas, int64_t step_index) const {
  LTX_CHECK(step_index >= 0 && step_index < static_cast<int64_t>(sigmas.size()), "SimpleDenoiser: step index ",
            step_index, " outside the ", sigmas.size(), " sigmas");
  const double sigma = sigmas[static_cast<size_t>(step_index)];
  std::optional<mt::Modality> v, a;
  // Each sample its own context; the ids only key the text K / V cache (text_kv_cache.h).
  const auto own_groups = [](mt::Modality& m) {
    m.context_groups.resize(static_cast<size_t>(m.latent.size(0)));
    for (size_t i = 0; i < m.context_groups.size(); ++i) m.context_groups[i] = static_cast<int64_t>(i);
  };
  if (video) {
    LTX_CHECK(video_context_.defined(), "SimpleDenoiser: a video state needs the video context");
    v = modality_from_state(*video, video_context_, sigma);
    own_groups(*v);
    v->text_kv_cache = &text_kv_cache_;
  }
  if (audio) {
    LTX_CHECK(audio_context_.defined(), "SimpleDenoiser: an audio state needs the audio context");
    a = modality_from_state(*audio, audio_context_, sigma);
    own_groups(*a);
    a->text_kv_cache = &text_kv_cache_;
  }
  const mt::ModelOutputs out = mt::X0Model{model_}(v ? &*v : nullptr, a ? &*a : nullptr, nullptr);
  DenoiseOutput r;
  r.video.denoised = out.video;
  r.audio.denoised = out.audio;
  return r;
}

sampling::Denoiser SimpleDenoiser::callback() const {
  return [this](const LatentState* v, const LatentState* a, const std::vector<double>& s, int64_t i) {
    return (*this)(v, a, s, i);
  };
}

GuidedDenoiser::GuidedDenoiser(const mt::LTXModel& model, ModalityContext video_context,
                               ModalityContext audio_context, std::optional<sampling::MultiModalGuiderFactory> video,
                               std::optional<sampling::MultiModalGuiderFactory> audio, bool force_uncond_pass)
    : model_(model), video_context_(std::move(video_context)), audio_context_(std::move(audio_context)),
      video_factory_(std::move(video)), audio_factory_(std::move(audio)), force_uncond_pass_(force_uncond_pass) {}

GuidedDenoiser::GuidedDenoiser(const mt::LTXModel& model, ModalityContext video_context,
                               ModalityContext audio_context, const sampling::GuiderParams& video,
                               const sampling::GuiderParams& audio, bool force_uncond_pass)
    : GuidedDenoiser(model, std::move(video_context), std::move(audio_context),
                     sampling::MultiModalGuiderFactory::constant(video),
                     sampling::MultiModalGuiderFactory::constant(audio), force_uncond_pass) {}

namespace {

// Tiles a [B, ...] tensor n times along the batch: [b0, b1, ..., b0, b1, ...] (torch's repeat).
Tensor repeat_batch(const Tensor& t, int64_t n) {
  if (!t.defined() || n == 1) return t;
  std::vector<int64_t> reps(static_cast<size_t>(t.dim()), 1);
  reps[0] = n;
  return ops::repeat(t, reps);
}

LatentState repeat_state(const LatentState& s, int64_t n) {
  LatentState r = s;
  r.latent = repeat_batch(s.latent, n);
  r.denoise_mask = repeat_batch(s.denoise_mask, n);
  if (n != 1 && r.denoise_mask.defined()) {
    // The repeated mask's levels: the state's, tiled like the batch (no device read).
    r.mask_levels = nullptr;
    if (const std::optional<std::vector<sampling::MaskRuns>> runs = sampling::mask_runs(s)) {
      auto levels = std::make_shared<sampling::MaskLevels>();
      levels->mask = r.denoise_mask;
      for (int64_t k = 0; k < n; ++k) levels->runs.insert(levels->runs.end(), runs->begin(), runs->end());
      r.mask_levels = std::move(levels);
    }
  }
  r.positions = repeat_batch(s.positions, n);
  r.clean_latent = repeat_batch(s.clean_latent, n);
  r.attention_mask = repeat_batch(s.attention_mask, n);
  r.keyframes_mask = repeat_batch(s.keyframes_mask, n);
  return r;
}

mt::PerturbationConfig perturbation_of(const GuidancePass& p) {
  mt::PerturbationConfig c;
  auto blocks = [](const std::vector<int>& b) { return std::vector<int64_t>(b.begin(), b.end()); };
  if (p.skip_video_self_attn)
    c.perturbations.push_back({mt::PerturbationType::SkipVideoSelfAttn, blocks(*p.skip_video_self_attn)});
  if (p.skip_audio_self_attn)
    c.perturbations.push_back({mt::PerturbationType::SkipAudioSelfAttn, blocks(*p.skip_audio_self_attn)});
  if (p.skip_cross_modal_attn) {
    c.perturbations.push_back({mt::PerturbationType::SkipA2VCrossAttn, std::nullopt});
    c.perturbations.push_back({mt::PerturbationType::SkipV2ACrossAttn, std::nullopt});
  }
  return c;
}

// The contexts of every pass concatenated along the batch.
Tensor batched_context(const std::vector<GuidancePass>& passes, const ModalityContext& ctx, const char* modality) {
  std::vector<Tensor> parts;
  for (const GuidancePass& p : passes) {
    const bool neg = p.negative_context && ctx.negative.defined();
    const Tensor& c = neg ? ctx.negative : ctx.positive;
    if (!parts.empty())
      LTX_CHECK(c.shape() == parts.front().shape(), "GuidedDenoiser: the negative and positive ", modality,
                " contexts differ in shape (", ctx.negative.shape().str(), " vs ", ctx.positive.shape().str(),
                "); encode both prompts with the same text encoder");
    parts.push_back(c);
  }
  return parts.size() == 1 ? parts.front() : ops::concat(parts, 0);
}

Tensor narrow_batch(const Tensor& t, int64_t start, int64_t len) {
  return t.defined() ? t.narrow(0, start, len) : t;
}

mt::Modality narrow_modality(const mt::Modality& m, int64_t start, int64_t len) {
  mt::Modality r = m;
  for (Tensor* t : {&r.latent, &r.sigma, &r.timesteps, &r.positions, &r.context, &r.context_mask, &r.attention_mask,
                    &r.keyframes_mask})
    *t = narrow_batch(*t, start, len);
  if (!m.context_groups.empty())
    r.context_groups.assign(m.context_groups.begin() + start, m.context_groups.begin() + start + len);
  if (!m.timestep_runs.empty())
    r.timestep_runs.assign(m.timestep_runs.begin() + start, m.timestep_runs.begin() + start + len);
  return r;
}

// One X0 call over the whole batch, or consecutive calls of at most `max_batch` samples.
mt::ModelOutputs run_batched(const mt::LTXModel& model, const std::optional<mt::Modality>& v,
                             const std::optional<mt::Modality>& a,
                             const std::vector<mt::PerturbationConfig>& per_sample, int64_t max_batch,
                             mt::StepCache* step_cache) {
  const int64_t total = static_cast<int64_t>(per_sample.size());
  if (max_batch <= 0 || max_batch >= total) {
    const mt::BatchedPerturbationConfig p(per_sample, model.num_blocks());
    return mt::X0Model{model, step_cache}(v ? &*v : nullptr, a ? &*a : nullptr, &p);
  }
  LTX_CHECK(step_cache == nullptr, "--cache decides once per step for all guidance passes, which needs them in one "
            "transformer call, but --max-batch-size ", max_batch, " splits the ", total,
            " samples; drop --max-batch-size or use --cache none");
  std::vector<Tensor> vs, as;
  for (int64_t s = 0; s < total; s += max_batch) {
    const int64_t len = std::min(max_batch, total - s);
    std::optional<mt::Modality> cv, ca;
    if (v) cv = narrow_modality(*v, s, len);
    if (a) ca = narrow_modality(*a, s, len);
    const mt::BatchedPerturbationConfig p(
        std::vector<mt::PerturbationConfig>(per_sample.begin() + s, per_sample.begin() + s + len), model.num_blocks());
    const mt::ModelOutputs o = mt::X0Model{model}(cv ? &*cv : nullptr, ca ? &*ca : nullptr, &p);
    if (o.video.defined()) vs.push_back(o.video);
    if (o.audio.defined()) as.push_back(o.audio);
  }
  mt::ModelOutputs out;
  if (!vs.empty()) out.video = ops::concat(vs, 0);
  if (!as.empty()) out.audio = ops::concat(as, 0);
  return out;
}

// The passes of a step's batch in order, their perturbations and the modalities they run: the
// step cache keeps residuals per row of the batch, so only a call of the same layout may reuse.
std::string pass_layout(const sampling::GuidancePlan& plan, int64_t batch) {
  std::string k = "batch " + std::to_string(batch) + (plan.skip_video ? " no-video" : "") +
                  (plan.skip_audio ? " no-audio" : "");
  const auto blocks = [](const std::optional<std::vector<int>>& b) {
    std::string s;
    if (b)
      for (int i : *b) s += std::to_string(i) + ".";
    return b ? "[" + s + "]" : std::string("-");
  };
  for (const GuidancePass& p : plan.passes)
    k += "; " + std::to_string(static_cast<int>(p.kind)) + (p.negative_context ? "n" : "p") +
         blocks(p.skip_video_self_attn) + blocks(p.skip_audio_self_attn) + (p.skip_cross_modal_attn ? "x" : "");
  return k;
}

bool same_passes(const sampling::GuidancePlan& a, const sampling::GuidancePlan& b) {
  if (a.skip_video != b.skip_video || a.skip_audio != b.skip_audio || a.skip_all != b.skip_all ||
      a.passes.size() != b.passes.size())
    return false;
  for (size_t i = 0; i < a.passes.size(); ++i) {
    const GuidancePass &p = a.passes[i], &q = b.passes[i];
    if (p.kind != q.kind || p.negative_context != q.negative_context || p.skip_video_self_attn != q.skip_video_self_attn ||
        p.skip_audio_self_attn != q.skip_audio_self_attn || p.skip_cross_modal_attn != q.skip_cross_modal_attn)
      return false;
  }
  return true;
}

}  // namespace

void GuidedDenoiser::set_step_cache(const mt::StepCacheParams& params) {
  if (params.enabled()) {
    step_cache_.emplace(params);
  } else {
    step_cache_.reset();
  }
}

void GuidedDenoiser::set_sample_guiders(std::vector<sampling::GuiderParams> video,
                                        std::vector<sampling::GuiderParams> audio) {
  LTX_CHECK(video.size() == audio.size(), "GuidedDenoiser: ", video.size(), " video guiders but ", audio.size(),
            " audio guiders; give one of each per sample");
  sample_video_guiders_ = std::move(video);
  sample_audio_guiders_ = std::move(audio);
}

DenoiseOutput GuidedDenoiser::operator()(const LatentState* video, const LatentState* audio,
                                         const std::vector<double>& sigmas, int64_t step_index) {
  LTX_CHECK(video || audio, "GuidedDenoiser: neither a video nor an audio state");
  if (!cached_sigmas_) cached_sigmas_ = sigmas;
  LTX_CHECK(step_index >= 0 && step_index < static_cast<int64_t>(cached_sigmas_->size()) &&
                step_index < static_cast<int64_t>(sigmas.size()),
            "GuidedDenoiser: step index ", step_index, " outside the sigmas");
  const double lookup_sigma = (*cached_sigmas_)[static_cast<size_t>(step_index)];
  const double sigma = sigmas[static_cast<size_t>(step_index)];

  const MultiModalGuider video_guider = video_factory_ ? video_factory_->build(lookup_sigma) : MultiModalGuider();
  const MultiModalGuider audio_guider = audio_factory_   ? audio_factory_->build(lookup_sigma)
                                        : video_factory_ ? video_factory_->build(lookup_sigma)
                                                         : MultiModalGuider();
  const sampling::GuidancePlan plan = sampling::plan_guidance(video_guider, audio_guider, video != nullptr,
                                                              audio != nullptr, static_cast<int>(step_index),
                                                              force_uncond_pass_);
  // Per-sample guiders: the same passes as the batch's plan, else the batch cannot run as one.
  std::vector<MultiModalGuider> sample_video, sample_audio;
  for (size_t i = 0; i < sample_video_guiders_.size(); ++i) {
    sample_video.emplace_back(sample_video_guiders_[i]);
    sample_audio.emplace_back(sample_audio_guiders_[i]);
    const sampling::GuidancePlan own = sampling::plan_guidance(sample_video.back(), sample_audio.back(), video != nullptr,
                                                               audio != nullptr, static_cast<int>(step_index),
                                                               force_uncond_pass_);
    LTX_CHECK(same_passes(own, plan), "GuidedDenoiser: sample ", i, "'s guidance (video ",
              sample_video_guiders_[i].str(), ", audio ", sample_audio_guiders_[i].str(), ") runs other passes than ",
              "sample 0's at step ", step_index, "; batch only jobs of one pipelines::batch_key");
  }
  DenoiseOutput out;
  if (plan.skip_all) {
    out.video.denoised = last_video_;
    out.audio.denoised = last_audio_;
    return out;
  }
  LTX_CHECK(!video || video_context_.positive.defined(), "GuidedDenoiser: a video state needs the video context");
  LTX_CHECK(!audio || audio_context_.positive.defined(), "GuidedDenoiser: an audio state needs the audio context");
  if (plan.index_of(GuidancePass::Kind::Uncond) >= 0) {
    // Only a modality that is denoised reads its negative context (audio off: no audio state).
    const bool v_neg = video && (video_guider.do_unconditional_generation() || force_uncond_pass_);
    const bool a_neg = audio && (audio_guider.do_unconditional_generation() || force_uncond_pass_);
    LTX_CHECK(!v_neg || video_context_.negative.defined(),
              "GuidedDenoiser: the video guider needs the negative prompt's context (cfg ",
              video_guider.params().cfg_scale, ")");
    LTX_CHECK(!a_neg || audio_context_.negative.defined(),
              "GuidedDenoiser: the audio guider needs the negative prompt's context (cfg ",
              audio_guider.params().cfg_scale, ")");
  }

  const int64_t n = static_cast<int64_t>(plan.passes.size());
  const int64_t batch = (video ? video : audio)->batch();
  LTX_CHECK(sample_video.empty() || static_cast<int64_t>(sample_video.size()) == batch, "GuidedDenoiser: ",
            sample_video.size(), " per-sample guiders for a batch of ", batch);
  std::optional<mt::Modality> bv, ba;
  if (video)
    bv = modality_from_state(repeat_state(*video, n), batched_context(plan.passes, video_context_, "video"), sigma,
                             !plan.skip_video, timestep_form_);
  if (audio)
    ba = modality_from_state(repeat_state(*audio, n), batched_context(plan.passes, audio_context_, "audio"), sigma,
                             !plan.skip_audio, timestep_form_);
  std::vector<mt::PerturbationConfig> per_sample;
  for (const GuidancePass& p : plan.passes)
    for (int64_t b = 0; b < batch; ++b) per_sample.push_back(perturbation_of(p));
  // Sample b of a pass reads item b of the positive or the negative context (batched_context), at
  // the step's one sigma: equal ids, equal text K / V; the same ids in every step (the cache).
  if (share_text_kv_) {
    const auto groups = [&](const ModalityContext& ctx) {
      std::vector<int64_t> g;
      for (const GuidancePass& p : plan.passes) {
        const bool neg = p.negative_context && ctx.negative.defined();
        for (int64_t b = 0; b < batch; ++b) g.push_back((neg ? batch : 0) + b);
      }
      return g;
    };
    if (bv) bv->context_groups = groups(video_context_);
    if (ba) ba->context_groups = groups(audio_context_);
    if (bv) bv->text_kv_cache = &text_kv_cache_;
    if (ba) ba->text_kv_cache = &text_kv_cache_;
  }
  if (step_cache_) {
    // The step this call belongs to: a res_2s midpoint call (a one-sigma list) is its step's.
    const bool scheduled = sigmas.size() >= 2;
    if (scheduled) last_step_ = step_index;
    const bool last = scheduled && step_index + 2 == static_cast<int64_t>(sigmas.size());
    step_cache_->begin_call(last_step_ >= step_cache_->params().warmup_steps && !last,
                            pass_layout(plan, batch));
  }
  const mt::ModelOutputs all =
      run_batched(model_, bv, ba, per_sample, max_batch_size_, step_cache_ ? &*step_cache_ : nullptr);
  ++calls_;

  auto combine = [&](const Tensor& joint, const MultiModalGuider& guider, const std::vector<MultiModalGuider>& per_sample,
                     bool skip, const Tensor& last, DenoisedLatent& res) {
    if (!joint.defined()) return;
    const std::vector<Tensor> parts = joint.chunk(n, 0);
    auto pass = [&](GuidancePass::Kind k) -> sampling::PassOutput {
      const int i = plan.index_of(k);
      return i < 0 ? std::nullopt : std::optional<Tensor>(parts[static_cast<size_t>(i)]);
    };
    const sampling::PassOutput uncond = pass(GuidancePass::Kind::Uncond), ptb = pass(GuidancePass::Kind::Perturbed),
                               mod = pass(GuidancePass::Kind::IsolatedModality);
    res.cond = parts[0];
    if (uncond) res.uncond = *uncond;
    if (ptb) res.ptb = *ptb;
    if (mod) res.mod = *mod;
    if (skip) {
      res.denoised = last;
    } else if (per_sample.empty()) {
      res.denoised = guider.calculate(parts[0], uncond, ptb, mod);
    } else {
      // Each sample with its own scales, on its own rows (the rescale's std is over one sample,
      // as in its solo run).
      const auto row = [](const sampling::PassOutput& p, int64_t b) -> sampling::PassOutput {
        return p ? std::optional<Tensor>(p->narrow(0, b, 1)) : std::nullopt;
      };
      std::vector<Tensor> rows;
      for (int64_t b = 0; b < batch; ++b)
        rows.push_back(per_sample[static_cast<size_t>(b)].calculate(parts[0].narrow(0, b, 1), row(uncond, b),
                                                                    row(ptb, b), row(mod, b)));
      res.denoised = ops::concat(rows, 0);
    }
  };
  combine(all.video, video_guider, sample_video, plan.skip_video, last_video_, out.video);
  combine(all.audio, audio_guider, sample_audio, plan.skip_audio, last_audio_, out.audio);
  last_video_ = out.video.denoised;
  last_audio_ = out.audio.denoised;
  return out;
}

sampling::Denoiser GuidedDenoiser::callback() {
  return [this](const LatentState* v, const LatentState* a, const std::vector<double>& s, int64_t i) {
    return (*this)(v, a, s, i);
  };
}

}  // namespace ltx::pipelines
