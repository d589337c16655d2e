#pragma once
// Sigma schedules. A schedule is the reference's float32 tensor of steps + 1 noise levels, from
// (about) 1 down to 0; here a std::vector<float> holding exactly those float32 values.
//
// The arithmetic reproduces the reference's float32 operation order (torch.linspace, x / tensor as
// reciprocal-then-multiply, exp(shift) in double rounded to float32), so the values are
// bit-identical to the reference's on the golden fixtures, not just close.
#include <cstdint>
#include <optional>
#include <vector>

namespace ltx::sampling {

using Sigmas = std::vector<float>;

// torch.linspace(start, end, steps) in float32 on the CPU (first half counted from `start`, second
// half from `end`, each term a fused multiply-add as in the reference build).
std::vector<float> linspace_f32(float start, float end, int64_t steps);

struct Ltx2SchedulerOptions {
  double max_shift = 2.05;
  double base_shift = 0.95;
  bool stretch = true;    // stretch so that the last non-zero sigma equals `terminal`
  double terminal = 0.1;
};

// Token counts the shift is interpolated between (base_shift at 1024, max_shift at 4096).
inline constexpr int64_t kBaseShiftAnchor = 1024;
inline constexpr int64_t kMaxShiftAnchor = 4096;

// LTX2Scheduler().execute(steps, latent): `tokens` is prod(latent.shape[2:]) = F*H*W of the video
// latent; std::nullopt stands for latent=None, i.e. 4096 tokens. Every pipeline except the HQ one
// calls it without a latent. Throws unless steps >= 1 and tokens >= 1.
Sigmas ltx2_schedule(int64_t steps, std::optional<int64_t> tokens = std::nullopt,
                     const Ltx2SchedulerOptions& options = {});
// The shift mu = tokens * m + b used by ltx2_schedule.
double ltx2_shift(int64_t tokens, double max_shift = 2.05, double base_shift = 0.95);

// LinearQuadraticScheduler().execute(steps, threshold_noise, linear_steps); linear_steps < 0 means
// steps / 2.
Sigmas linear_quadratic_schedule(int64_t steps, double threshold_noise = 0.025,
                                 int64_t linear_steps = -1);

// BetaScheduler().execute(steps, alpha, beta): timesteps from the Beta(alpha, beta) quantiles over a
// 10000-step flux-shifted (shift 2.37) table, duplicates removed, plus a final 0. May hold fewer
// than steps + 1 values (the reference's deduplication).
Sigmas beta_schedule(int64_t steps, double alpha = 0.6, double beta = 0.6);

// Regularized incomplete beta function I_x(a, b) (double precision; a, b > 0, x in [0, 1]).
double incomplete_beta(double a, double b, double x);
// Quantile of Beta(a, b): the x with I_x(a, b) = p (p in [0, 1]), as scipy.stats.beta.ppf. When
// a, b < 1 and p is the probability of the inflection point (1 - a) / (2 - a - b) (to 1e-13), that
// point itself is returned, as scipy does (this decides the symmetric median's rounding).
double beta_ppf(double p, double a, double b);

// ltx_pipelines.utils.constants sigma lists (float32 values).
const Sigmas& distilled_sigmas();          // stage 1 of the distilled pipeline (8 steps)
const Sigmas& stage2_distilled_sigmas();   // stage 2 of every two-stage pipeline (3 steps)
const Sigmas& tdp_distilled_sigmas();      // stage 2 of the tiled data-parallel runner (2 steps)

}  // namespace ltx::sampling
