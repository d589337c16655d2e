#pragma once
// The denoising loops as the pipelines run them (ltx_pipelines.utils.samplers): Euler, gradient-
// estimating Euler, Euler ancestral, Euler CFG++ and res_2s, over a joint video + audio state
// (either may be absent). The model is behind a Denoiser callback, so the loops run the same with
// the transformer + guider, a test's analytic mock, or recorded outputs.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "sampling/latent.h"
#include "sampling/noise.h"
#include "sampling/schedulers.h"
#include "sampling/steps.h"

namespace ltx::sampling {

// One modality's prediction. `denoised` undefined = no prediction (the modality is left as is).
// uncond/cond/ptb/mod: the raw guidance passes when a guided denoiser ran them (CFG++ needs
// uncond).
struct DenoisedLatent {
  Tensor denoised;
  Tensor uncond, cond, ptb, mod;
  bool has() const { return denoised.defined(); }
};
struct DenoiseOutput {
  DenoisedLatent video, audio;
};

// denoiser(video, audio, sigmas, step_index): predict x0 for the states (nullptr = absent) at noise
// level sigmas[step_index]. `sigmas` are the schedule's float32 values widened to double, except
// in the res_2s midpoint call, which passes {sqrt(sigma * sigma_next)} computed in double with
// step_index 0 (as the reference does).
using Denoiser = std::function<DenoiseOutput(const LatentState* video, const LatentState* audio,
                                             const std::vector<double>& sigmas, int64_t step_index)>;

struct AVState {
  std::optional<LatentState> video;
  std::optional<LatentState> audio;
};

// Called after every step with (steps done, total steps).
using StepCallback = std::function<void(int64_t done, int64_t total)>;

// euler_denoising_loop with EulerDiffusionStep: for every sigma but the last, x0 = denoiser(...),
// re-pinned to the clean latent where the mask is 0, then one Euler step (state dtype kept).
AVState euler_loop(const Sigmas& sigmas, AVState state, const Denoiser& denoiser, const StepCallback& on_step = {});

// gradient_estimating_euler_denoising_loop: Euler with the velocity corrected by
// ge_gamma * (v - v_prev); the step into sigma 0 returns the x0 prediction.
AVState gradient_estimating_euler_loop(const Sigmas& sigmas, AVState state, const Denoiser& denoiser,
                                       double ge_gamma = 2.0, const StepCallback& on_step = {});

struct AncestralLoopOptions {
  std::optional<DType> model_dtype;  // state dtype after each step (default: the latent's dtype)
  NoiseFn new_noise = plain_noise;   // the noise drawn per modality per step (video first)
  StepCallback on_step;
};
// euler_ancestral_denoising_loop: one generator for all draws (the distilled 2.5 pipeline seeds it
// with seed + 10000). Steps in f32; conditioned tokens re-pinned after the noise; the step into
// sigma 0 returns the x0 prediction.
AVState euler_ancestral_loop(const Sigmas& sigmas, AVState state, const Denoiser& denoiser,
                             const EulerAncestralStep& stepper, NoiseSource& generator,
                             const AncestralLoopOptions& options = {});
// euler_cfg_pp_denoising_loop: as above with EulerCfgPpStep; every prediction must carry uncond.
AVState euler_cfg_pp_loop(const Sigmas& sigmas, AVState state, const Denoiser& denoiser, const EulerCfgPpStep& stepper,
                          NoiseSource& generator, const AncestralLoopOptions& options = {});

struct Res2sLoopOptions {
  double eta = 0.5;           // step-level SDE noise (the substep always uses 0.5)
  bool bongmath = true;       // anchor refinement when h < 0.5 and sigma > 0.03
  int bongmath_max_iter = 100;
  bool legacy_mode = true;    // scalar sigmas + re-pin after each injection (the pipelines' mode)
  std::optional<DType> model_dtype;  // state dtype between evaluations (default: the latent's)
  NoiseFn new_noise = res2s_noise;   // normalised float64 noise
  StepCallback on_step;
};
// res2s_audio_video_denoising_loop: second-order RK (c2 = 0.5) in float64 with SDE noise at the
// midpoint (substep generator) and after each step (step generator); draws per step: substep
// video, substep audio, step video, step audio. A final sigma 0 becomes [0.0011, 0] and one more
// denoiser call at 0.0011 gives the result. The float64 maths runs as f64 ops on the states'
// device (no read-back inside a step: only the host-drawn noise is uploaded); the result is there.
AVState res2s_loop(const Sigmas& sigmas, AVState state, const Denoiser& denoiser, NoiseSource& step_generator,
                   NoiseSource& substep_generator, const Res2sLoopOptions& options = {});
// Same with torch CPU generators seeded like the reference: step noise `noise_seed`, substep noise
// `noise_seed + 10000` (the pipelines use the default -1, i.e. 2^64 - 1 and 9999).
AVState res2s_loop(const Sigmas& sigmas, AVState state, const Denoiser& denoiser, int64_t noise_seed = -1,
                   const Res2sLoopOptions& options = {});

// The device of the state's latents (video and audio must agree); throws for an empty state.
Device state_device(const AVState& state);
// Every tensor of both states moved to `device` (LatentState::to).
AVState on_device(const AVState& state, Device device);

// sigmas as the double list handed to the denoiser.
std::vector<double> widen(const Sigmas& sigmas);

}  // namespace ltx::sampling
