#pragma once
// Single diffusion steps (ltx_core.components.diffusion_steps, ltx_core.utils, the res_2s RK
// coefficients). Every step works on x0 (denoised) predictions. The float32 steps follow the
// reference's operation order (scalar maths on float32 0-d tensors, one rounding per torch op) as
// tensor ops on the inputs' device, so a loop on the GPU never copies its state back; results are
// on that device in the dtype the reference returns (noted per function). The res_2s step is
// float64 like the res_2s loop: host maths (inputs read from any device), CPU results.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "sampling/schedulers.h"

namespace ltx::sampling {

// (sample - denoised) / sigma in f32, returned in sample's dtype. Throws for sigma == 0.
Tensor to_velocity(const Tensor& sample, double sigma, const Tensor& denoised);
// sample - velocity * sigma in f32, returned in sample's dtype.
Tensor to_denoised(const Tensor& sample, const Tensor& velocity, double sigma);

// EulerDiffusionStep: x + v * (sigma_next - sigma) with v = to_velocity(...) rounded to sample's
// dtype first; result in sample's dtype.
Tensor euler_step(const Tensor& sample, const Tensor& denoised, const Sigmas& sigmas, int64_t step_index);

// EulerAncestralDiffusionStep (rectified-flow form, alpha = 1 - sigma): a deterministic step to
// sigma_down = sigma_next * (1 + (sigma_next / sigma - 1) * eta) then renoising to sigma_next.
// Returns denoised (in sample's dtype) when sigma_next == 0. `noise` is required when eta > 0.
struct EulerAncestralStep {
  double eta = 1.0;
  double s_noise = 1.0;
  Tensor step(const Tensor& sample, const Tensor& denoised, const Sigmas& sigmas, int64_t step_index,
              const Tensor& noise = Tensor()) const;
};

// EulerCfgPpDiffusionStep: the ODE direction from the unconditional prediction (CFG++) with DDIM
// ancestral noise in the sigma / alpha parameterisation. `noise` may be undefined (no noise).
struct EulerCfgPpStep {
  double eta = 1.0;
  double s_noise = 1.0;
  Tensor step(const Tensor& sample, const Tensor& denoised, const Sigmas& sigmas, int64_t step_index,
              const Tensor& uncond_denoised, const Tensor& noise = Tensor()) const;
};

// Res2sDiffusionStep.get_sde_coeff for a given sigma_up: sigma_up is clamped to 0.9999 sigma_next,
// alpha_ratio = (1 - sigma_next) + sqrt(sigma_next^2 - sigma_up^2), sigma_down = that sqrt /
// alpha_ratio; NaNs replaced (sigma_up -> 0, sigma_down -> sigma_next, alpha_ratio -> 1).
// Computed in T (double for f64 sigmas, float for f32 ones, as the reference's tensors are).
template <typename T>
struct SdeCoefficients {
  T alpha_ratio;
  T sigma_down;
  T sigma_up;
};
template <typename T>
SdeCoefficients<T> sde_coefficients(T sigma_next, T sigma_up);

// Res2sDiffusionStep.step in float64: eps = (x - d) / (sigma - sigma_next), x0 = x - sigma * eps,
// result alpha_ratio * (x0 + sigma_down * eps) + sigma_up * noise, with the coefficients for
// sigma_up = eta * sigma_next. Returns `denoised` unchanged when sigma_up or sigma_next is 0.
// `sigmas` are the float64 schedule values. Result F64, on the sample's device (float64 ops).
Tensor res2s_step(const Tensor& sample, const Tensor& denoised, const std::vector<double>& sigmas,
                  int64_t step_index, const Tensor& noise, double eta = 0.5);
// The same step with the SDE coefficients formed in float32 (what the res_2s loop's step-level
// noise injection does in legacy mode, where the schedule is a float32 tensor).
Tensor res2s_step_f32_coefficients(const Tensor& sample, const Tensor& denoised, float sigma, float sigma_next,
                                   const Tensor& noise, double eta = 0.5);
// Per-token variant (the loop's non-legacy mode): sigma / sigma_next per token ([B, T] values,
// broadcast over channels); returns denoised unchanged when any token's sigma_up or sigma_next is 0.
Tensor res2s_step_per_token(const Tensor& sample, const Tensor& denoised, const std::vector<double>& sigma,
                            const std::vector<double>& sigma_next, const Tensor& noise, double eta = 0.5);

// phi_j(z) = (e^z - sum_{k<j} z^k / k!) / z^j (1 / j! for |z| < 1e-10).
double res2s_phi(int j, double z);
struct Res2sCoefficients {
  double a21, b1, b2;
};
// a21 = c2 phi1(-h c2), b2 = phi2(-h) / c2, b1 = phi1(-h) - b2.
Res2sCoefficients res2s_coefficients(double h, double c2 = 0.5);

}  // namespace ltx::sampling
