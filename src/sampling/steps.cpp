#include "sampling/steps.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "ops/elementwise.h"

namespace ltx::sampling {
namespace {

void check_pair(const char* op, const Tensor& sample, const Tensor& other, const char* other_name) {
  LTX_CHECK(sample.defined() && other.defined(), op, ": sample and ", other_name, " must be defined");
  LTX_CHECK(sample.shape() == other.shape(), op, ": sample ", sample.describe(), " and ", other_name, " ",
            other.describe(), " must have the same shape");
}

void check_index(const char* op, size_t n_sigmas, int64_t step_index) {
  LTX_CHECK(step_index >= 0 && static_cast<size_t>(step_index) + 1 < n_sigmas, op, ": step index ", step_index,
            " needs sigmas[", step_index, "] and sigmas[", step_index + 1, "] but the schedule has ", n_sigmas,
            " values");
}

// The float32 working copy of an input (a no-op for f32 tensors; exact for bf16 ones). Every step
// computes on the device its inputs live on, one rounding per op as the reference's torch ops.
Tensor f32(const Tensor& t) { return t.to(DType::F32); }

}  // namespace

Tensor to_velocity(const Tensor& sample, double sigma, const Tensor& denoised) {
  check_pair("to_velocity", sample, denoised, "denoised");
  LTX_CHECK(sigma != 0.0, "to_velocity: sigma can't be 0");
  const float s = static_cast<float>(sigma);
  return ops::div(ops::sub(f32(sample), f32(denoised)), s).to(sample.dtype());
}

Tensor to_denoised(const Tensor& sample, const Tensor& velocity, double sigma) {
  check_pair("to_denoised", sample, velocity, "velocity");
  const float s = static_cast<float>(sigma);
  return ops::sub(f32(sample), ops::mul(f32(velocity), s)).to(sample.dtype());
}

Tensor euler_step(const Tensor& sample, const Tensor& denoised, const Sigmas& sigmas, int64_t i) {
  check_index("euler_step", sigmas.size(), i);
  const float sigma = sigmas[static_cast<size_t>(i)], sigma_next = sigmas[static_cast<size_t>(i) + 1];
  const float dt = sigma_next - sigma;
  // The velocity is rounded to the sample's dtype before the update (bf16 in the pipelines).
  const Tensor v = f32(to_velocity(sample, sigma, denoised));
  return ops::add(f32(sample), ops::mul(v, dt)).to(sample.dtype());
}

Tensor EulerAncestralStep::step(const Tensor& sample, const Tensor& denoised_t, const Sigmas& sigmas,
                                int64_t i, const Tensor& noise_t) const {
  check_pair("EulerAncestralStep", sample, denoised_t, "denoised");
  check_index("EulerAncestralStep", sigmas.size(), i);
  const float sigma = sigmas[static_cast<size_t>(i)], sigma_next = sigmas[static_cast<size_t>(i) + 1];
  if (sigma_next == 0.0f) return denoised_t.to(sample.dtype());
  LTX_CHECK(!(eta > 0) || noise_t.defined(), "EulerAncestralStep: a noise tensor is required when eta > 0");
  if (noise_t.defined()) check_pair("EulerAncestralStep", sample, noise_t, "noise");
  const float ratio = 1.0f + (sigma_next / sigma - 1.0f) * static_cast<float>(eta);
  const float sigma_down = sigma_next * ratio;
  const float down = sigma_down / sigma;
  const float keep = 1.0f - down;
  Tensor out = ops::add(ops::mul(f32(sample), down), ops::mul(f32(denoised_t), keep));
  if (eta > 0) {
    const float alpha_next = 1.0f - sigma_next, alpha_down = 1.0f - sigma_down;
    const float var = sigma_next * sigma_next -
                      ((sigma_down * sigma_down) * (alpha_next * alpha_next)) / (alpha_down * alpha_down);
    const float renoise = std::sqrt(std::max(var, 0.0f));
    const float rescale = alpha_next / alpha_down;
    const float sn = static_cast<float>(s_noise);
    out = ops::add(ops::mul(out, rescale), ops::mul(ops::mul(f32(noise_t), sn), renoise));
  }
  return out.to(sample.dtype());
}

Tensor EulerCfgPpStep::step(const Tensor& sample, const Tensor& denoised_t, const Sigmas& sigmas, int64_t i,
                            const Tensor& uncond_t, const Tensor& noise_t) const {
  check_pair("EulerCfgPpStep", sample, denoised_t, "denoised");
  check_pair("EulerCfgPpStep", sample, uncond_t, "uncond_denoised");
  check_index("EulerCfgPpStep", sigmas.size(), i);
  const float sigma_s = sigmas[static_cast<size_t>(i)], sigma_t = sigmas[static_cast<size_t>(i) + 1];
  const float eps = std::numeric_limits<float>::epsilon();
  const float alpha_s = std::max(1.0f - sigma_s, eps), alpha_t = std::max(1.0f - sigma_t, eps);
  // DDIM ancestral step in the rescaled sigma / alpha space.
  const float from = sigma_s / alpha_s, to = sigma_t / alpha_t;
  float sigma_down = to, sigma_up = 0.0f;
  if (eta != 0) {
    const float variance = ((to * to) * std::max(from * from - to * to, 0.0f)) / (from * from);
    sigma_up = std::min(static_cast<float>(eta) * std::sqrt(variance), to);
    sigma_down = std::sqrt(std::max(to * to - sigma_up * sigma_up, 0.0f));
  }
  sigma_down = alpha_t * sigma_down;
  const Tensor ode = ops::div(ops::sub(f32(sample), ops::mul(f32(uncond_t), alpha_s)), sigma_s);
  Tensor out = ops::add(ops::mul(f32(denoised_t), alpha_t), ops::mul(ode, sigma_down));
  if (noise_t.defined() && eta > 0 && s_noise > 0) {
    check_pair("EulerCfgPpStep", sample, noise_t, "noise");
    const float sn = static_cast<float>(s_noise);
    out = ops::add(out, ops::mul(ops::mul(ops::mul(f32(noise_t), alpha_t), sn), sigma_up));
  }
  return out.to(sample.dtype());
}

template <typename T>
SdeCoefficients<T> sde_coefficients(T sigma_next, T sigma_up) {
  sigma_up = std::min(sigma_up, sigma_next * static_cast<T>(0.9999));
  const T signal = static_cast<T>(1) - sigma_next;
  const T residual = std::sqrt(std::max(sigma_next * sigma_next - sigma_up * sigma_up, static_cast<T>(0)));
  T alpha_ratio = signal + residual;
  T sigma_down = residual / alpha_ratio;
  if (std::isnan(sigma_up)) sigma_up = 0;
  if (std::isnan(sigma_down)) sigma_down = sigma_next;
  if (std::isnan(alpha_ratio)) alpha_ratio = 1;
  return {alpha_ratio, sigma_down, sigma_up};
}
template SdeCoefficients<float> sde_coefficients<float>(float, float);
template SdeCoefficients<double> sde_coefficients<double>(double, double);

namespace {

// One coefficient of the res_2s SDE mix: a value for every token, or one per token ([B, T, 1] f64
// on the sample's device, broadcast over the channels).
struct MixFactor {
  double value = 0;
  Tensor per_token;
};

Tensor times(const Tensor& x, const MixFactor& f) {
  return f.per_token.defined() ? ops::mul(x, f.per_token) : ops::mul(x, f.value);
}

Tensor over(const Tensor& x, const MixFactor& f) {
  return f.per_token.defined() ? ops::div(x, f.per_token) : ops::div(x, f.value);
}

struct MixFactors {
  MixFactor sigma, sigma_minus_next, alpha_ratio, sigma_down, sigma_up;
};

// eps = (x - d) / (sigma - sigma_next), x0 = x - sigma eps, alpha_ratio (x0 + sigma_down eps) +
// sigma_up noise: float64 ops on the sample's device, one rounding each, as the reference's float64
// tensors compute it (no host copy: the loop calls this inside a denoising step).
Tensor res2s_mix(const char* op, const Tensor& sample, const Tensor& denoised, const MixFactors& f,
                 const Tensor& noise_t) {
  check_pair(op, sample, noise_t, "noise");
  const Tensor x = sample.to(DType::F64), d = denoised.to(DType::F64), n = noise_t.to(DType::F64);
  const Tensor eps_next = over(ops::sub(x, d), f.sigma_minus_next);
  const Tensor x0 = ops::sub(x, times(eps_next, f.sigma));
  return ops::add(times(ops::add(x0, times(eps_next, f.sigma_down)), f.alpha_ratio), times(n, f.sigma_up));
}

MixFactors scalar_factors(double sigma, double sigma_minus_next, const SdeCoefficients<double>& c) {
  return {{sigma, {}}, {sigma_minus_next, {}}, {c.alpha_ratio, {}}, {c.sigma_down, {}}, {c.sigma_up, {}}};
}

}  // namespace

Tensor res2s_step(const Tensor& sample, const Tensor& denoised, const std::vector<double>& sigmas, int64_t i,
                  const Tensor& noise, double eta) {
  check_index("res2s_step", sigmas.size(), i);
  check_pair("res2s_step", sample, denoised, "denoised");
  const double sigma = sigmas[static_cast<size_t>(i)], sigma_next = sigmas[static_cast<size_t>(i) + 1];
  const SdeCoefficients<double> c = sde_coefficients<double>(sigma_next, sigma_next * eta);
  if (c.sigma_up == 0 || sigma_next == 0) return denoised.to(DType::F64);
  return res2s_mix("res2s_step", sample, denoised, scalar_factors(sigma, sigma - sigma_next, c), noise);
}

Tensor res2s_step_f32_coefficients(const Tensor& sample, const Tensor& denoised, float sigma, float sigma_next,
                                   const Tensor& noise, double eta) {
  check_pair("res2s_step", sample, denoised, "denoised");
  const SdeCoefficients<float> c = sde_coefficients<float>(sigma_next, sigma_next * static_cast<float>(eta));
  if (c.sigma_up == 0 || sigma_next == 0) return denoised.to(DType::F64);
  return res2s_mix("res2s_step", sample, denoised,
                   scalar_factors(sigma, static_cast<double>(sigma - sigma_next),
                                  {c.alpha_ratio, c.sigma_down, c.sigma_up}),
                   noise);
}

Tensor res2s_step_per_token(const Tensor& sample, const Tensor& denoised, const std::vector<double>& sigma,
                            const std::vector<double>& sigma_next, const Tensor& noise_t, double eta) {
  check_pair("res2s_step_per_token", sample, denoised, "denoised");
  LTX_CHECK(sample.dim() == 3 && sigma.size() == static_cast<size_t>(sample.size(0) * sample.size(1)) &&
                sigma_next.size() == sigma.size(),
            "res2s_step_per_token: need one sigma per token of ", sample.describe(), ", got ", sigma.size(),
            " and ", sigma_next.size());
  // The per-token coefficients come from the host schedule values; only they are uploaded.
  const size_t tokens = sigma.size();
  std::vector<double> smn(tokens), ar(tokens), sd(tokens), su(tokens);
  for (size_t t = 0; t < tokens; ++t) {
    const SdeCoefficients<double> c = sde_coefficients<double>(sigma_next[t], sigma_next[t] * eta);
    // One zero anywhere disables the injection for the whole tensor (torch.any in the reference).
    if (c.sigma_up == 0 || sigma_next[t] == 0) return denoised.to(DType::F64);
    smn[t] = sigma[t] - sigma_next[t];
    ar[t] = c.alpha_ratio;
    sd[t] = c.sigma_down;
    su[t] = c.sigma_up;
  }
  const Shape per_token{sample.size(0), sample.size(1), 1};
  const Device dev = sample.device();
  auto upload = [&](const std::vector<double>& v) { return MixFactor{0, Tensor::from_vector(v, per_token).to(dev)}; };
  return res2s_mix("res2s_step_per_token", sample, denoised,
                   {upload(sigma), upload(smn), upload(ar), upload(sd), upload(su)}, noise_t);
}

double res2s_phi(int j, double z) {
  LTX_CHECK(j >= 1, "res2s_phi: j must be >= 1, got ", j);
  double factorial = 1;
  for (int k = 2; k <= j; ++k) factorial *= k;
  if (std::fabs(z) < 1e-10) return 1.0 / factorial;
  double remainder = 0;
  double kf = 1;  // k!
  for (int k = 0; k < j; ++k) {
    if (k > 0) kf *= k;
    remainder += std::pow(z, static_cast<double>(k)) / kf;
  }
  return (std::exp(z) - remainder) / std::pow(z, static_cast<double>(j));
}

Res2sCoefficients res2s_coefficients(double h, double c2) {
  const double a21 = c2 * res2s_phi(1, -h * c2);
  const double b2 = res2s_phi(2, -h) / c2;
  const double b1 = res2s_phi(1, -h) - b2;
  return {a21, b1, b2};
}

}  // namespace ltx::sampling
