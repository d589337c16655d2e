#include "sampling/schedulers.h"

#include <cmath>
#include <limits>
#include <unordered_set>

#include "core/error.h"

namespace ltx::sampling {

std::vector<float> linspace_f32(float start, float end, int64_t steps) {
  LTX_CHECK(steps >= 0, "linspace_f32: steps must be >= 0, got ", steps);
  std::vector<float> out(static_cast<size_t>(steps));
  if (steps == 0) return out;
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i) {
    out[static_cast<size_t>(i)] =
        i < halfway ? std::fma(step, static_cast<float>(i), start)
                    : std::fma(-step, static_cast<float>(steps - i - 1), end);
  }
  return out;
}

double ltx2_shift(int64_t tokens, double max_shift, double base_shift) {
  const double m = (max_shift - base_shift) / static_cast<double>(kMaxShiftAnchor - kBaseShiftAnchor);
  const double b = base_shift - m * static_cast<double>(kBaseShiftAnchor);
  return static_cast<double>(tokens) * m + b;
}

Sigmas ltx2_schedule(int64_t steps, std::optional<int64_t> tokens, const Ltx2SchedulerOptions& o) {
  LTX_CHECK(steps >= 1, "LTX2 scheduler: steps must be >= 1, got ", steps);
  const int64_t n_tokens = tokens.value_or(kMaxShiftAnchor);
  LTX_CHECK(n_tokens >= 1, "LTX2 scheduler: the latent has ", n_tokens, " tokens; need >= 1");
  Sigmas s = linspace_f32(1.0f, 0.0f, steps + 1);
  // exp(shift) / (exp(shift) + (1/t - 1)) with torch's float32 ops: the Python float exp(shift)
  // becomes float32, and scalar / tensor is reciprocal(tensor) * scalar.
  const float e = static_cast<float>(std::exp(ltx2_shift(n_tokens, o.max_shift, o.base_shift)));
  for (float& v : s) {
    if (v == 0.0f) continue;
    const float odds = 1.0f / v - 1.0f;
    v = (1.0f / (e + odds)) * e;
  }
  if (o.stretch) {
    int64_t last = -1;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] != 0.0f) last = static_cast<int64_t>(i);
    LTX_CHECK(last >= 0, "LTX2 scheduler: no non-zero sigma to stretch");
    const float scale = (1.0f - s[static_cast<size_t>(last)]) / static_cast<float>(1.0 - o.terminal);
    for (float& v : s)
      if (v != 0.0f) v = 1.0f - (1.0f - v) / scale;
  }
  return s;
}

Sigmas linear_quadratic_schedule(int64_t steps, double threshold_noise, int64_t linear_steps) {
  LTX_CHECK(steps >= 1, "linear-quadratic scheduler: steps must be >= 1, got ", steps);
  if (steps == 1) return {1.0f, 0.0f};
  if (linear_steps < 0) linear_steps = steps / 2;
  LTX_CHECK(linear_steps >= 1 && linear_steps <= steps, "linear-quadratic scheduler: linear_steps ",
            linear_steps, " must be in [1, ", steps, "]");
  std::vector<double> sched;
  for (int64_t i = 0; i < linear_steps; ++i)
    sched.push_back(static_cast<double>(i) * threshold_noise / static_cast<double>(linear_steps));
  const double step_diff = static_cast<double>(linear_steps) - threshold_noise * static_cast<double>(steps);
  const int64_t quadratic_steps = steps - linear_steps;
  if (quadratic_steps > 0) {
    const double q2 = static_cast<double>(quadratic_steps * quadratic_steps);
    const double quadratic_coef = step_diff / static_cast<double>(linear_steps * quadratic_steps * quadratic_steps);
    const double linear_coef = threshold_noise / static_cast<double>(linear_steps) - 2.0 * step_diff / q2;
    const double constant = quadratic_coef * static_cast<double>(linear_steps * linear_steps);
    for (int64_t i = linear_steps; i < steps; ++i)
      sched.push_back(quadratic_coef * static_cast<double>(i * i) + linear_coef * static_cast<double>(i) +
                      constant);
  }
  sched.push_back(1.0);
  Sigmas out;
  for (double x : sched) out.push_back(static_cast<float>(1.0 - x));
  return out;
}

namespace {

// Continued fraction of I_x(a, b) (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double incomplete_beta_cf(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  constexpr double kEps = 1e-16;
  double c = 1.0;
  double d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double dm = static_cast<double>(m);
    const double even = dm * (b - dm) * x / ((a + 2 * dm - 1) * (a + 2 * dm));
    d = 1.0 + even * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + even / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    const double odd = -(a + dm) * (a + b + dm) * x / ((a + 2 * dm) * (a + 2 * dm + 1));
    d = 1.0 + odd * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + odd / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < kEps) break;
  }
  return h;
}

}  // namespace

double incomplete_beta(double a, double b, double x) {
  LTX_CHECK(a > 0 && b > 0, "incomplete_beta: a and b must be > 0, got a=", a, " b=", b);
  LTX_CHECK(x >= 0 && x <= 1, "incomplete_beta: x must be in [0, 1], got ", x);
  if (x == 0.0) return 0.0;
  if (x == 1.0) return 1.0;
  const double log_front =
      a * std::log(x) + b * std::log1p(-x) - (std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b));
  if (x < (a + 1.0) / (a + b + 2.0)) return std::exp(log_front) * incomplete_beta_cf(a, b, x) / a;
  return 1.0 - std::exp(log_front) * incomplete_beta_cf(b, a, 1.0 - x) / b;
}

double beta_ppf(double p, double a, double b) {
  LTX_CHECK(a > 0 && b > 0, "beta_ppf: a and b must be > 0, got a=", a, " b=", b);
  LTX_CHECK(p >= 0 && p <= 1, "beta_ppf: p must be in [0, 1], got ", p);
  if (p == 0.0) return 0.0;
  if (p == 1.0) return 1.0;
  if (a < 1.0 && b < 1.0) {
    // The CDF has an inflection point here; when p sits on it (to the accuracy of
    // incomplete_beta), the point itself is the answer, as scipy returns it: the symmetric median
    // of Beta(0.6, 0.6) is (1 - 0.6) / (2 - 0.6 - 0.6) = 0.5000000000000001, which the beta
    // scheduler's rint(ppf * 9999) needs to land on 5000.
    const double xs = (1.0 - a) / (2.0 - a - b);
    if (std::fabs(incomplete_beta(a, b, xs) - p) / p < 1e-13) return xs;
  }
  // Bisection to the last bit: the CDF is monotone, and this runs a few dozen times per schedule.
  double lo = 0.0, hi = 1.0;
  for (int it = 0; it < 2000; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    if (incomplete_beta(a, b, mid) < p) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return std::fabs(incomplete_beta(a, b, lo) - p) <= std::fabs(incomplete_beta(a, b, hi) - p) ? lo : hi;
}

namespace {

// flux_time_shift(2.37, 1, t) for t = (k + 1) / 10000, k = 0..9999, in float32 as the reference
// computes it (each t a float32 0-d tensor).
const std::vector<float>& beta_sigma_table() {
  static const std::vector<float> table = [] {
    constexpr int kLength = 10000;
    const float e = static_cast<float>(std::exp(2.37));
    std::vector<float> t(kLength);
    for (int k = 0; k < kLength; ++k) {
      const float ts = static_cast<float>(k + 1) / static_cast<float>(kLength);
      const float odds = 1.0f / ts - 1.0f;
      t[static_cast<size_t>(k)] = (1.0f / (e + odds)) * e;
    }
    return t;
  }();
  return table;
}

}  // namespace

Sigmas beta_schedule(int64_t steps, double alpha, double beta) {
  LTX_CHECK(steps >= 1, "beta scheduler: steps must be >= 1, got ", steps);
  const std::vector<float>& table = beta_sigma_table();
  const double total = static_cast<double>(table.size() - 1);
  const double step = 1.0 / static_cast<double>(steps);  // numpy.linspace(0, 1, steps, endpoint=False)
  Sigmas out;
  std::unordered_set<int64_t> seen;
  for (int64_t i = 0; i < steps; ++i) {
    const double ts = 1.0 - (static_cast<double>(i) * step + 0.0);
    const int64_t t = static_cast<int64_t>(std::nearbyint(beta_ppf(ts, alpha, beta) * total));
    if (!seen.insert(t).second) continue;
    out.push_back(table[static_cast<size_t>(t)]);
  }
  out.push_back(0.0f);
  return out;
}

const Sigmas& distilled_sigmas() {
  static const Sigmas s = {1.0f, 0.99375f, 0.9875f, 0.98125f, 0.975f, 0.909375f, 0.725f, 0.421875f, 0.0f};
  return s;
}
const Sigmas& stage2_distilled_sigmas() {
  static const Sigmas s = {0.909375f, 0.725f, 0.421875f, 0.0f};
  return s;
}
const Sigmas& tdp_distilled_sigmas() {
  static const Sigmas s = {0.625f, 0.4f, 0.0f};
  return s;
}

}  // namespace ltx::sampling
