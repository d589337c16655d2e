#include "sampling/loops.h"

#include <cmath>

#include "core/error.h"
#include "ops/elementwise.h"

namespace ltx::sampling {
namespace {

const LatentState* ptr(const std::optional<LatentState>& s) { return s ? &*s : nullptr; }

DenoiseOutput call(const Denoiser& denoiser, const AVState& st, const std::vector<double>& sigmas, int64_t index) {
  LTX_CHECK(static_cast<bool>(denoiser), "denoising loop: no denoiser given");
  return denoiser(ptr(st.video), ptr(st.audio), sigmas, index);
}

void check_schedule(const char* loop, const Sigmas& sigmas) {
  LTX_CHECK(sigmas.size() >= 2, loop, ": the schedule needs at least 2 sigmas, got ", sigmas.size());
}

void check_state(const char* loop, const AVState& st) {
  LTX_CHECK(st.video || st.audio, loop, ": at least one of the video and audio states is required");
}

// x0 re-pinned to the clean latent where the mask is 0; undefined when there is no prediction.
Tensor pinned(const std::optional<LatentState>& state, const DenoisedLatent& r) {
  if (!state || !r.has()) return Tensor();
  return post_process_latent(r.denoised, state->denoise_mask, state->clean_latent);
}

DType target_dtype(const std::optional<DType>& model_dtype, const LatentState& s) {
  return model_dtype.value_or(s.latent.dtype());
}

void progress(const StepCallback& cb, int64_t done, int64_t total) {
  if (cb) cb(done, total);
}

}  // namespace

std::vector<double> widen(const Sigmas& sigmas) { return {sigmas.begin(), sigmas.end()}; }

Device state_device(const AVState& state) {
  check_state("state_device", state);
  const Device d = (state.video ? *state.video : *state.audio).latent.device();
  LTX_CHECK(!state.video || !state.audio || state.audio->latent.device() == d, "state_device: the video latent is on ",
            d.str(), " but the audio latent on ", state.audio->latent.device().str(), "; move both to one device");
  return d;
}

AVState on_device(const AVState& state, Device device) {
  AVState out;
  if (state.video) out.video = state.video->to(device);
  if (state.audio) out.audio = state.audio->to(device);
  return out;
}

AVState euler_loop(const Sigmas& sigmas, AVState st, const Denoiser& denoiser, const StepCallback& on_step) {
  check_schedule("euler_loop", sigmas);
  const std::vector<double> sd = widen(sigmas);
  const int64_t steps = static_cast<int64_t>(sigmas.size()) - 1;
  for (int64_t i = 0; i < steps; ++i) {
    const DenoiseOutput out = call(denoiser, st, sd, i);
    if (Tensor d = pinned(st.video, out.video); d.defined())
      st.video = st.video->with_latent(euler_step(st.video->latent, d, sigmas, i));
    if (Tensor d = pinned(st.audio, out.audio); d.defined())
      st.audio = st.audio->with_latent(euler_step(st.audio->latent, d, sigmas, i));
    progress(on_step, i + 1, steps);
  }
  return st;
}

AVState gradient_estimating_euler_loop(const Sigmas& sigmas, AVState st, const Denoiser& denoiser, double ge_gamma,
                                       const StepCallback& on_step) {
  check_schedule("gradient_estimating_euler_loop", sigmas);
  const std::vector<double> sd = widen(sigmas);
  const int64_t steps = static_cast<int64_t>(sigmas.size()) - 1;
  Tensor prev_velocity[2];
  const float gamma = static_cast<float>(ge_gamma);
  for (int64_t i = 0; i < steps; ++i) {
    const DenoiseOutput out = call(denoiser, st, sd, i);
    Tensor d[2] = {pinned(st.video, out.video), pinned(st.audio, out.audio)};
    std::optional<LatentState>* states[2] = {&st.video, &st.audio};
    if (sigmas[static_cast<size_t>(i) + 1] == 0.0f) {
      for (int m = 0; m < 2; ++m)
        if (d[m].defined()) *states[m] = (*states[m])->with_latent(d[m]);
      progress(on_step, steps, steps);
      return st;
    }
    const double sigma = sigmas[static_cast<size_t>(i)];
    for (int m = 0; m < 2; ++m) {
      if (!d[m].defined()) continue;
      const Tensor& x = (*states[m])->latent;
      const Tensor velocity = to_velocity(x, sigma, d[m]);
      Tensor denoised = d[m];
      if (prev_velocity[m].defined()) {
        // gamma (v - v_prev) + v_prev in f32, rounded to the velocity's dtype.
        const Tensor pv = prev_velocity[m].to(DType::F32);
        const Tensor total = ops::add(ops::mul(ops::sub(velocity.to(DType::F32), pv), gamma), pv);
        denoised = to_denoised(x, total.to(velocity.dtype()), sigma);
      }
      prev_velocity[m] = velocity;
      *states[m] = (*states[m])->with_latent(euler_step(x, denoised, sigmas, i));
    }
    progress(on_step, i + 1, steps);
  }
  return st;
}

namespace {

// The shared ancestral driver: `step_fn(sample_f32, denoised_f32, index, noise, modality result)`.
using AncestralStepFn =
    std::function<Tensor(const Tensor&, const Tensor&, int64_t, const Tensor&, const DenoisedLatent&, const char*)>;

AVState ancestral_driver(const char* loop, const Sigmas& sigmas, AVState st, const Denoiser& denoiser,
                         NoiseSource& generator, const AncestralLoopOptions& o, bool draw_noise,
                         const AncestralStepFn& step_fn) {
  check_schedule(loop, sigmas);
  check_state(loop, st);
  const std::vector<double> sd = widen(sigmas);
  const int64_t steps = static_cast<int64_t>(sigmas.size()) - 1;
  for (int64_t i = 0; i < steps; ++i) {
    const DenoiseOutput out = call(denoiser, st, sd, i);
    std::optional<LatentState>* states[2] = {&st.video, &st.audio};
    const DenoisedLatent* results[2] = {&out.video, &out.audio};
    const char* names[2] = {"video", "audio"};
    // Every present modality's x0 is pinned (in f32) before any noise is drawn.
    Tensor d[2];
    for (int m = 0; m < 2; ++m)
      if (*states[m] && results[m]->has())
        d[m] = post_process_latent(results[m]->denoised.to(DType::F32), (*states[m])->denoise_mask,
                                   (*states[m])->clean_latent);
    const bool terminal = sigmas[static_cast<size_t>(i) + 1] == 0.0f;
    for (int m = 0; m < 2; ++m) {
      if (!*states[m] || !d[m].defined()) continue;
      const LatentState& s = **states[m];
      const DType dt = target_dtype(o.model_dtype, s);
      if (terminal) {
        *states[m] = s.with_latent(d[m].to(dt));
        continue;
      }
      // Drawn on the host generator, uploaded to the state's device (no sync).
      const Tensor noise =
          draw_noise ? o.new_noise(s.latent.shape(), s.latent.dtype(), generator).to(s.latent.device()) : Tensor();
      Tensor x = step_fn(s.latent.to(DType::F32), d[m], i, noise, *results[m], names[m]);
      if (draw_noise) x = post_process_latent(x, s.denoise_mask, s.clean_latent);
      *states[m] = s.with_latent(x.to(dt));
    }
    progress(o.on_step, i + 1, steps);
    if (terminal) break;
  }
  return st;
}

}  // namespace

AVState euler_ancestral_loop(const Sigmas& sigmas, AVState st, const Denoiser& denoiser,
                             const EulerAncestralStep& stepper, NoiseSource& generator, const AncestralLoopOptions& o) {
  return ancestral_driver(
      "euler_ancestral_loop", sigmas, std::move(st), denoiser, generator, o, stepper.eta > 0,
      [&](const Tensor& x, const Tensor& d, int64_t i, const Tensor& noise, const DenoisedLatent&, const char*) {
        return stepper.step(x, d, sigmas, i, noise);
      });
}

AVState euler_cfg_pp_loop(const Sigmas& sigmas, AVState st, const Denoiser& denoiser, const EulerCfgPpStep& stepper,
                          NoiseSource& generator, const AncestralLoopOptions& o) {
  return ancestral_driver(
      "euler_cfg_pp_loop", sigmas, std::move(st), denoiser, generator, o, stepper.eta > 0 && stepper.s_noise > 0,
      [&](const Tensor& x, const Tensor& d, int64_t i, const Tensor& noise, const DenoisedLatent& r, const char* name) {
        LTX_CHECK(r.uncond.defined(), "euler_cfg_pp_loop: the ", name,
                  " prediction has no uncond pass; use a guided denoiser with cfg != 1 (or a forced uncond pass)");
        return stepper.step(x, d, sigmas, i, r.uncond, noise);
      });
}

namespace {

// mask * sigma per token, from the mask's host copy (no device read).
std::vector<double> token_sigmas(const std::vector<double>& mask, double sigma) {
  std::vector<double> m = mask;
  for (double& v : m) v *= sigma;
  return m;
}

}  // namespace

AVState res2s_loop(const Sigmas& sigmas_in, AVState st, const Denoiser& denoiser, NoiseSource& step_generator,
                   NoiseSource& substep_generator, const Res2sLoopOptions& o) {
  check_schedule("res2s_loop", sigmas_in);
  check_state("res2s_loop", st);
  // The float64 maths runs as f64 ops on the states' device: nothing is read back inside a step.
  // Only the noise (drawn on the host generators) and, in non-legacy mode, the per-token SDE
  // coefficients (from a host copy of the masks, taken once here) are uploaded.
  const Device dev = state_device(st);
  std::optional<LatentState>* states[2] = {&st.video, &st.audio};
  std::vector<double> host_mask[2];
  if (!o.legacy_mode)
    for (int m = 0; m < 2; ++m)
      if (*states[m]) host_mask[m] = (*states[m])->denoise_mask.to_double_vector();
  const int64_t n_full = static_cast<int64_t>(sigmas_in.size()) - 1;
  Sigmas sigmas = sigmas_in;
  if (sigmas.back() == 0.0f) {
    // Avoid dividing by zero in the last step: end at 0.0011 and finish with one more x0 call.
    sigmas.back() = 0.0011f;
    sigmas.push_back(0.0f);
  }
  const std::vector<double> sd = widen(sigmas);
  std::vector<double> hs(sigmas.size() - 1);
  for (size_t i = 0; i + 1 < sigmas.size(); ++i) hs[i] = -std::log(sd[i + 1] / sd[i]);

  constexpr double kC2 = 0.5;
  constexpr double kSubstepEta = 0.5;

  // Noise injection after an update (the reference's _inject_sde_noise). `f32_sigmas` selects the
  // step-level legacy path, whose SDE coefficients are float32 maths on the float32 schedule.
  auto inject = [&](int m, const Tensor& sample, const Tensor& denoised, double sigma, double sigma_next,
                    bool f32_sigmas, double eta, NoiseSource& gen) {
    const LatentState& s = **states[m];
    const Tensor noise = o.new_noise(s.latent.shape(), s.latent.dtype(), gen).to(dev);
    if (!o.legacy_mode)
      return res2s_step_per_token(sample, denoised, token_sigmas(host_mask[m], sigma),
                                  token_sigmas(host_mask[m], sigma_next), noise, eta);
    Tensor x = f32_sigmas ? res2s_step_f32_coefficients(sample, denoised, static_cast<float>(sigma),
                                                        static_cast<float>(sigma_next), noise, eta)
                          : res2s_step(sample, denoised, {sigma, sigma_next}, 0, noise, eta);
    return post_process_latent(x, s.denoise_mask, s.clean_latent);
  };

  for (int64_t i = 0; i < n_full; ++i) {
    const double sigma = sd[static_cast<size_t>(i)], sigma_next = sd[static_cast<size_t>(i) + 1];
    const double h = hs[static_cast<size_t>(i)];
    const Res2sCoefficients c = res2s_coefficients(h, kC2);
    const double sub_sigma = std::sqrt(sigma * sigma_next);
    const double h_a21 = h * c.a21;

    Tensor anchor[2], d1[2], eps1[2], mid[2];
    const DenoiseOutput out1 = call(denoiser, st, sd, i);
    const DenoisedLatent* r1[2] = {&out1.video, &out1.audio};
    for (int m = 0; m < 2; ++m) {
      if (!*states[m]) continue;
      anchor[m] = (*states[m])->latent.to(DType::F64);
      if (Tensor d = pinned(*states[m], *r1[m]); d.defined()) d1[m] = d.to(DType::F64);
    }
    // Midpoint x_mid = x + h a21 (x0_1 - x).
    for (int m = 0; m < 2; ++m) {
      if (!anchor[m].defined() || !d1[m].defined()) continue;
      eps1[m] = ops::sub(d1[m], anchor[m]);
      mid[m] = ops::add(anchor[m], ops::mul(eps1[m], h_a21));
    }
    for (int m = 0; m < 2; ++m)
      if (mid[m].defined()) mid[m] = inject(m, anchor[m], mid[m], sigma, sub_sigma, false, kSubstepEta, substep_generator);
    // Bong iteration: move the anchor so that the midpoint is consistent with eps_1.
    if (o.bongmath && h < 0.5 && sigma > 0.03) {
      for (int m = 0; m < 2; ++m) {
        if (!mid[m].defined()) continue;
        for (int it = 0; it < o.bongmath_max_iter; ++it) {
          anchor[m] = ops::sub(mid[m], ops::mul(eps1[m], h_a21));
          eps1[m] = ops::sub(d1[m], anchor[m]);
        }
      }
    }
    // Second evaluation at the midpoint.
    AVState mid_state;
    for (int m = 0; m < 2; ++m) {
      if (!mid[m].defined()) continue;
      const LatentState& s = **states[m];
      (m == 0 ? mid_state.video : mid_state.audio) = s.with_latent(mid[m].to(target_dtype(o.model_dtype, s)));
    }
    const DenoiseOutput out2 = call(denoiser, mid_state, {sub_sigma}, 0);
    const DenoisedLatent* r2[2] = {&out2.video, &out2.audio};
    Tensor next[2];
    for (int m = 0; m < 2; ++m) {
      if (!anchor[m].defined() || !eps1[m].defined()) continue;
      const Tensor d2 = pinned(*states[m], *r2[m]);
      if (!d2.defined()) continue;
      // x + h (b1 eps_1 + b2 eps_2), eps_2 = x0_2 - x.
      const Tensor eps2 = ops::sub(d2.to(DType::F64), anchor[m]);
      next[m] = ops::add(anchor[m], ops::mul(ops::add(ops::mul(eps1[m], c.b1), ops::mul(eps2, c.b2)), h));
    }
    for (int m = 0; m < 2; ++m)
      if (next[m].defined()) next[m] = inject(m, anchor[m], next[m], sigma, sigma_next, true, o.eta, step_generator);
    for (int m = 0; m < 2; ++m)
      if (next[m].defined())
        *states[m] = (*states[m])->with_latent(next[m].to(target_dtype(o.model_dtype, **states[m])));
    progress(o.on_step, i + 1, n_full);
  }

  if (sigmas.back() == 0.0f) {
    const DenoiseOutput out = call(denoiser, st, sd, n_full);
    const DenoisedLatent* r[2] = {&out.video, &out.audio};
    for (int m = 0; m < 2; ++m) {
      const Tensor d = pinned(*states[m], *r[m]);
      if (!d.defined()) continue;
      *states[m] = (*states[m])->with_latent(d.to(target_dtype(o.model_dtype, **states[m])));
    }
  }
  return st;
}

AVState res2s_loop(const Sigmas& sigmas, AVState state, const Denoiser& denoiser, int64_t noise_seed,
                   const Res2sLoopOptions& options) {
  TorchCpuGenerator step(noise_seed);
  TorchCpuGenerator substep(noise_seed + 10000);
  return res2s_loop(sigmas, std::move(state), denoiser, step, substep, options);
}

}  // namespace ltx::sampling
