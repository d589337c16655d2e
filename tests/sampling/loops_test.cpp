#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "sampling/loops.h"
#include "sampling/sampling_fixtures.h"

namespace ltx::loops_test {
namespace {

using sampling::AVState;
using sampling::DenoiseOutput;
using sampling::LatentState;

constexpr const char* kFile = "sampling_loops";
constexpr double kTol = 1e-5;  // golden README: loops (f32 states, f64 inner maths for res_2s)

Tensor in(const std::string& name) { return test::golden_tensor(kFile, name); }

sampling::Sigmas sigmas_of(const std::string& loop) {
  const std::vector<float> v = in(loop + ".sigmas").to_float_vector();
  return {v.begin(), v.end()};
}

AVState initial_state() { return test::loop_fixture_state(); }

// The fixture's analytic mock: denoised = 0.9 tanh(latent) + 0.05 sigma (f32); records inputs.
struct MockDenoiser {
  std::vector<Tensor> video_in, audio_in;
  std::vector<double> sigmas;
  DenoiseOutput operator()(const LatentState* v, const LatentState* a, const std::vector<double>& s, int64_t i) {
    const double sigma = s.at(static_cast<size_t>(i));
    sigmas.push_back(sigma);
    DenoiseOutput out;
    auto f = [&](const LatentState& st) {
      std::vector<float> x = st.latent.to_float_vector();
      const float shift = static_cast<float>(0.05 * sigma);
      for (float& e : x) e = 0.9f * std::tanh(e) + shift;
      return Tensor::from_vector(x, st.latent.shape());
    };
    if (v) {
      video_in.push_back(v->latent.clone());
      out.video.denoised = f(*v);
    }
    if (a) {
      audio_in.push_back(a->latent.clone());
      out.audio.denoised = f(*a);
    }
    return out;
  }
  sampling::Denoiser fn() {
    return [this](const LatentState* v, const LatentState* a, const std::vector<double>& s, int64_t i) {
      return (*this)(v, a, s, i);
    };
  }
};

// Every denoiser input and the final latents against the fixture.
void expect_loop(const std::string& loop, const MockDenoiser& mock, const AVState& final_state) {
  const std::vector<double> want_sigmas = in(loop + ".call_sigmas").to_double_vector();
  ASSERT_EQ(mock.sigmas.size(), want_sigmas.size()) << loop << ": number of denoiser calls";
  for (size_t k = 0; k < want_sigmas.size(); ++k) {
    EXPECT_NEAR(mock.sigmas[k], want_sigmas[k], 1e-15) << loop << " call " << k;
    const std::string c = loop + ".call" + std::to_string(k);
    EXPECT_LE(test::max_rel_err(mock.video_in[k], in(c + ".video_in")), kTol) << c << ".video_in";
    EXPECT_LE(test::max_rel_err(mock.audio_in[k], in(c + ".audio_in")), kTol) << c << ".audio_in";
  }
  ASSERT_TRUE(final_state.video && final_state.audio);
  EXPECT_LE(test::max_rel_err(final_state.video->latent, in(loop + ".video.final")), kTol) << loop << " video";
  EXPECT_LE(test::max_rel_err(final_state.audio->latent, in(loop + ".audio.final")), kTol) << loop << " audio";
}

std::vector<Tensor> recorded(const std::string& loop, int n) {
  std::vector<Tensor> v;
  for (int k = 0; k < n; ++k) v.push_back(in(loop + ".noise" + std::to_string(k)));
  return v;
}

TEST(EulerLoop, MatchesFixtureAndKeepsConditionedTokensClean) {
  MockDenoiser mock;
  int64_t progress = 0;
  const AVState out = sampling::euler_loop(sigmas_of("euler"), initial_state(), mock.fn(),
                                           [&](int64_t done, int64_t total) {
                                             EXPECT_EQ(total, 8);
                                             progress = done;
                                           });
  expect_loop("euler", mock, out);
  EXPECT_EQ(progress, 8);
  // Tokens with mask 0 end at their clean value.
  EXPECT_LE(test::max_abs_diff(out.video->latent.narrow(1, 0, 24), in("in.video.clean").narrow(1, 0, 24)), 1e-6);
}

TEST(GradientEstimatingEulerLoop, MatchesFixture) {
  MockDenoiser mock;
  const AVState out = sampling::gradient_estimating_euler_loop(sigmas_of("ge"), initial_state(), mock.fn(), 2.0);
  expect_loop("ge", mock, out);
}

TEST(EulerAncestralLoop, MatchesFixtureWithRecordedNoise) {
  MockDenoiser mock;
  sampling::RecordedNoise noise(recorded("ancestral", 14));
  sampling::AncestralLoopOptions o;
  o.model_dtype = DType::F32;
  const AVState out = sampling::euler_ancestral_loop(sigmas_of("ancestral"), initial_state(), mock.fn(),
                                                     sampling::EulerAncestralStep{1.0, 1.0}, noise, o);
  expect_loop("ancestral", mock, out);
  EXPECT_EQ(noise.remaining(), 0u);
}

TEST(EulerAncestralLoop, TorchGeneratorDrawsTheReferenceNoise) {
  // The loop's own generator (seed 10042) replaces the recording: same result.
  MockDenoiser mock;
  sampling::TorchCpuGenerator gen(10042);
  const AVState out = sampling::euler_ancestral_loop(sigmas_of("ancestral"), initial_state(), mock.fn(),
                                                     sampling::EulerAncestralStep{1.0, 1.0}, gen);
  expect_loop("ancestral", mock, out);
}

void run_res2s(const std::string& loop, bool legacy, bool bongmath, bool recorded_noise) {
  MockDenoiser mock;
  sampling::Res2sLoopOptions o;
  o.legacy_mode = legacy;
  o.bongmath = bongmath;
  o.model_dtype = DType::F32;
  AVState out;
  if (recorded_noise) {
    sampling::RecordedNoise noise(recorded(loop, 32));
    // One recording holds both generators' draws in call order.
    o.new_noise = [&](const Shape& shape, DType, sampling::NoiseSource&) { return noise.next(shape); };
    sampling::TorchCpuGenerator unused_step(0), unused_substep(0);
    out = sampling::res2s_loop(sigmas_of(loop), initial_state(), mock.fn(), unused_step, unused_substep, o);
    EXPECT_EQ(noise.remaining(), 0u) << loop;
  } else {
    out = sampling::res2s_loop(sigmas_of(loop), initial_state(), mock.fn(), 42, o);
  }
  expect_loop(loop, mock, out);
}

TEST(Res2sLoop, LegacyModeMatchesFixtureWithRecordedNoise) { run_res2s("res2s", true, true, true); }
TEST(Res2sLoop, NonLegacyModeMatchesFixture) { run_res2s("res2s_nolegacy", false, true, true); }
TEST(Res2sLoop, WithoutBongIterationMatchesFixture) { run_res2s("res2s_nobong", true, false, true); }
TEST(Res2sLoop, SeededGeneratorsReproduceTheReferenceRun) { run_res2s("res2s", true, true, false); }

TEST(Res2sLoop, ReplacesAFinalZeroSigmaWithOneMoreCall) {
  MockDenoiser mock;
  sampling::Res2sLoopOptions o;
  const sampling::Sigmas s = {1.0f, 0.5f, 0.0f};
  sampling::res2s_loop(s, initial_state(), mock.fn(), 42, o);
  // 2 steps x (stage 1 + midpoint) + the final x0 call at 0.0011.
  ASSERT_EQ(mock.sigmas.size(), 5u);
  EXPECT_EQ(mock.sigmas[1], std::sqrt(1.0 * 0.5));
  EXPECT_EQ(mock.sigmas[3], std::sqrt(0.5 * static_cast<double>(0.0011f)));
  EXPECT_EQ(mock.sigmas[4], static_cast<double>(0.0011f));
}

TEST(Loops, AbsentModalityAndMissingPredictionsPassThrough) {
  MockDenoiser mock;
  AVState st = initial_state();
  st.audio.reset();
  const AVState out = sampling::euler_loop(sampling::distilled_sigmas(), st, mock.fn());
  EXPECT_FALSE(out.audio.has_value());
  EXPECT_TRUE(mock.audio_in.empty());
  // A denoiser that predicts nothing leaves the state untouched.
  const sampling::Denoiser none = [](const LatentState*, const LatentState*, const std::vector<double>&, int64_t) {
    return DenoiseOutput{};
  };
  const AVState same = sampling::euler_loop(sampling::distilled_sigmas(), initial_state(), none);
  EXPECT_EQ(test::max_abs_diff(same.video->latent, in("in.video.init")), 0.0);
  sampling::TorchCpuGenerator g(1);
  EXPECT_THROW(sampling::euler_ancestral_loop(sampling::distilled_sigmas(), AVState{}, none, {}, g), Error);
  EXPECT_THROW(sampling::euler_loop({1.0f}, initial_state(), none), Error);
}

TEST(EulerCfgPpLoop, NeedsUncondAndUsesIt) {
  sampling::TorchCpuGenerator g(3);
  const sampling::Denoiser no_uncond = [](const LatentState* v, const LatentState*, const std::vector<double>&, int64_t) {
    DenoiseOutput o;
    o.video.denoised = v->latent.clone();
    return o;
  };
  AVState st = initial_state();
  st.audio.reset();
  EXPECT_THROW(sampling::euler_cfg_pp_loop(sampling::distilled_sigmas(), st, no_uncond, {}, g), Error);
  // With uncond == cond the CFG++ step is a DDIM step; the loop reaches the x0 prediction.
  const sampling::Denoiser with_uncond = [](const LatentState* v, const LatentState*, const std::vector<double>&,
                                            int64_t) {
    DenoiseOutput o;
    o.video.denoised = Tensor::full(v->latent.shape(), 0.25);
    o.video.uncond = o.video.denoised;
    return o;
  };
  const AVState out = sampling::euler_cfg_pp_loop(sampling::distilled_sigmas(), st, with_uncond, {}, g);
  // Generated tokens end at x0 = 0.25, conditioned ones at their clean value.
  EXPECT_LE(test::max_abs_diff(out.video->latent.narrow(1, 24, 24), Tensor::full({1, 24, 24}, 0.25)), 1e-6);
  EXPECT_LE(test::max_abs_diff(out.video->latent.narrow(1, 0, 24), in("in.video.clean").narrow(1, 0, 24)), 1e-6);
}

}  // namespace
}  // namespace ltx::loops_test
