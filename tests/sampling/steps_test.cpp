#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "sampling/schedulers.h"
#include "sampling/steps.h"
#include "sampling/sampling_fixtures.h"

namespace ltx::steps_test {
namespace {

constexpr const char* kFile = "sampling_steps";
constexpr double kTolF32 = 1e-6;   // golden README: Euler / ancestral / CFG++ / to_velocity
constexpr double kTolF64 = 1e-12;  // res_2s steps, SDE coefficients, RK coefficients

Tensor in(const std::string& name) { return test::golden_tensor(kFile, name); }

sampling::Sigmas distilled() {
  const std::vector<float> v = in("in.sigmas_distilled").to_float_vector();
  return {v.begin(), v.end()};
}

TEST(EulerStep, MatchesFixtureAtEveryDistilledIndex) {
  const sampling::Sigmas s = distilled();
  for (int i = 0; i < 8; ++i) {
    const std::string key = "euler.step" + std::to_string(i);
    EXPECT_LE(test::max_rel_err(sampling::euler_step(in("in.sample"), in("in.denoised"), s, i), in(key)), kTolF32) << key;
  }
  EXPECT_THROW(sampling::euler_step(in("in.sample"), in("in.denoised"), s, 8), Error);
}

TEST(EulerStep, RoundsTheVelocityToTheSampleDtype) {
  // bf16 sample: the velocity is rounded to bf16 before x + v * dt, then the result again.
  const Tensor x = test::random_tensor({1, 6, 4}, 3).to(DType::BF16), d = test::random_tensor({1, 6, 4}, 4);
  const sampling::Sigmas s = {0.7f, 0.3f};
  const Tensor got = sampling::euler_step(x, d, s, 0);
  EXPECT_EQ(got.dtype(), DType::BF16);
  const Tensor v = sampling::to_velocity(x, 0.7f, d);
  EXPECT_EQ(v.dtype(), DType::BF16);
  const auto xv = x.to_float_vector(), vv = v.to_float_vector(), gv = got.to_float_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    const float want = Tensor::full({1}, xv[i] + vv[i] * (0.3f - 0.7f), DType::BF16).to_float_vector()[0];
    EXPECT_EQ(gv[i], want);
  }
}

TEST(EulerAncestralStep, MatchesFixtureForEta1AndHalf) {
  const sampling::Sigmas s = distilled();
  for (double eta : {1.0, 0.5}) {
    const sampling::EulerAncestralStep step{eta, 1.0};
    const std::string tag = eta == 1.0 ? "ancestral_eta1" : "ancestral_eta0.5";
    for (int i = 0; i < 8; ++i) {
      const std::string key = tag + ".step" + std::to_string(i);
      EXPECT_LE(test::max_rel_err(step.step(in("in.sample"), in("in.denoised"), s, i, in("in.noise")), in(key)), kTolF32)
          << key;
    }
  }
}

TEST(EulerAncestralStep, EtaZeroIsEulerAndNoiseIsRequiredOtherwise) {
  const sampling::Sigmas s = distilled();
  const Tensor x = in("in.sample"), d = in("in.denoised");
  const Tensor a = sampling::EulerAncestralStep{0.0, 1.0}.step(x, d, s, 2);
  EXPECT_LE(test::max_rel_err(a, sampling::euler_step(x, d, s, 2)), 1e-6);
  EXPECT_THROW(sampling::EulerAncestralStep{}.step(x, d, s, 2), Error);
  // Into sigma 0 the step returns x0.
  EXPECT_EQ(test::max_abs_diff(sampling::EulerAncestralStep{}.step(x, d, s, 7), d), 0.0);
}

TEST(EulerCfgPpStep, MatchesFixture) {
  const sampling::Sigmas s = distilled();
  const sampling::EulerCfgPpStep step{1.0, 1.0};
  for (int i = 0; i < 8; ++i) {
    const std::string key = "cfgpp.step" + std::to_string(i);
    EXPECT_LE(test::max_rel_err(step.step(in("in.sample"), in("in.denoised"), s, i, in("in.uncond"), in("in.noise")),
                                in(key)),
              kTolF32)
        << key;
  }
}

TEST(Res2sStep, MatchesFixtureInFloat64) {
  const std::vector<double> sig = in("in.sigmas_res2s").to_double_vector();
  const Tensor x = in("in.sample").to(DType::F64), d = in("in.denoised").to(DType::F64), n = in("in.noise").to(DType::F64);
  for (int i : {0, 3, 7, 13, 14})
    for (double eta : {0.5, 0.25}) {
      const std::string key = "res2s.step" + std::to_string(i) + ".eta" + (eta == 0.5 ? "0.5" : "0.25");
      const Tensor got = sampling::res2s_step(x, d, sig, i, n, eta);
      EXPECT_EQ(got.dtype(), DType::F64);
      EXPECT_LE(test::max_rel_err(got, in(key)), kTolF64) << key;
    }
  // The last step goes to sigma 0: the denoised sample comes back unchanged.
  EXPECT_EQ(test::max_abs_diff(sampling::res2s_step(x, d, sig, 14, n), d), 0.0);
}

TEST(Res2sStep, PerTokenSigmasEqualTheScalarStepAndZeroDisablesNoise) {
  const Tensor x = in("in.sample").to(DType::F64), d = in("in.denoised").to(DType::F64), n = in("in.noise").to(DType::F64);
  const std::vector<double> sig = {0.8, 0.6};
  const Tensor scalar = sampling::res2s_step(x, d, sig, 0, n, 0.5);
  std::vector<double> s(48, 0.8), sn(48, 0.6);
  EXPECT_LE(test::max_abs_diff(sampling::res2s_step_per_token(x, d, s, sn, n, 0.5), scalar), 1e-15);
  sn[5] = 0.0;  // one conditioned token: torch.any(...) turns the injection off everywhere
  EXPECT_EQ(test::max_abs_diff(sampling::res2s_step_per_token(x, d, s, sn, n, 0.5), d), 0.0);
}

TEST(Res2sSdeCoefficients, MatchFixture) {
  const std::vector<double> sn = in("in.sde_sigma_next").to_double_vector();
  for (double eta : {0.5, 0.25, 1.0}) {
    const std::string tag = std::string("sde_coeff.eta") + (eta == 0.5 ? "0.5" : eta == 0.25 ? "0.25" : "1.0");
    const std::vector<double> ar = in(tag + ".alpha_ratio").to_double_vector(), sd = in(tag + ".sigma_down").to_double_vector(),
                              su = in(tag + ".sigma_up").to_double_vector();
    for (size_t i = 0; i < sn.size(); ++i) {
      const auto c = sampling::sde_coefficients<double>(sn[i], sn[i] * eta);
      EXPECT_NEAR(c.alpha_ratio, ar[i], kTolF64) << tag << " #" << i;
      EXPECT_NEAR(c.sigma_down, sd[i], kTolF64) << tag << " #" << i;
      EXPECT_NEAR(c.sigma_up, su[i], kTolF64) << tag << " #" << i;
    }
  }
}

TEST(Res2sCoefficients, MatchFixtureRows) {
  const Tensor t = in("res2s.coefficients");
  ASSERT_EQ(t.shape(), (Shape{9, 7}));
  const std::vector<double> r = t.to_double_vector();
  for (int row = 0; row < 9; ++row) {
    const double* v = r.data() + row * 7;
    const double h = v[0];
    const sampling::Res2sCoefficients c = sampling::res2s_coefficients(h, 0.5);
    const double got[6] = {c.a21, c.b1, c.b2, sampling::res2s_phi(1, -h), sampling::res2s_phi(2, -h),
                           sampling::res2s_phi(1, -h * 0.5)};
    for (int k = 0; k < 6; ++k)
      EXPECT_NEAR(got[k], v[k + 1], kTolF64 * std::max(1.0, std::fabs(v[k + 1]))) << "h=" << h << " col " << k + 1;
  }
  EXPECT_EQ(sampling::res2s_phi(2, 0.0), 0.5);  // 1 / j! near 0
  EXPECT_THROW(sampling::res2s_phi(0, 1.0), Error);
}

TEST(Velocity, ToVelocityAndBackMatchFixture) {
  const Tensor v = sampling::to_velocity(in("in.sample"), 0.7, in("in.denoised"));
  EXPECT_LE(test::max_rel_err(v, in("to_velocity.sigma0.7")), kTolF32);
  const Tensor d = sampling::to_denoised(in("in.sample"), in("to_velocity.sigma0.7"), 0.7);
  EXPECT_LE(test::max_rel_err(d, in("to_denoised.sigma0.7")), kTolF32);
  EXPECT_THROW(sampling::to_velocity(in("in.sample"), 0.0, in("in.denoised")), Error);
  EXPECT_THROW(sampling::to_velocity(in("in.sample"), 0.5, test::random_tensor({1, 2}, 1)), Error);
}

}  // namespace
}  // namespace ltx::steps_test
