#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "sampling/params.h"
#include "sampling/schedulers.h"
#include "sampling/sampling_fixtures.h"

namespace ltx::schedules_test {
namespace {

using sampling::Sigmas;

constexpr const char* kFile = "sampling_schedules";

Sigmas fixture_sigmas(const std::string& name) {
  const std::vector<float> v = test::golden_tensor(kFile, name).to_float_vector();
  return {v.begin(), v.end()};
}

// Max |a - b|, and how many entries are not bit-identical.
std::pair<double, int> compare(const Sigmas& got, const Sigmas& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  int differ = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    differ += got[i] != want[i];
  }
  return {worst, differ};
}

TEST(Ltx2Scheduler, MatchesEveryFixtureScheduleBitForBit) {
  const nlohmann::json entries = test::golden_meta(kFile, "entries");
  int checked = 0;
  for (const std::string& name : test::golden(kFile).names()) {
    if (name.rfind("ltx2.", 0) != 0) continue;
    const int64_t steps = std::stoll(name.substr(10, name.find('.', 5) - 10));
    const int64_t tokens = entries.at(name).at("tokens").get<int64_t>();
    sampling::Ltx2SchedulerOptions o;
    if (name.find(".nostretch") != std::string::npos) o.stretch = false;
    if (name.find(".terminal0.05") != std::string::npos) o.terminal = 0.05;
    if (name.find(".shift1.5_0.5") != std::string::npos) {
      o.max_shift = 1.5;
      o.base_shift = 0.5;
    }
    const bool no_latent = name.find(".default") != std::string::npos;
    const Sigmas got = sampling::ltx2_schedule(steps, no_latent ? std::nullopt : std::optional<int64_t>(tokens), o);
    const auto [worst, differ] = compare(got, fixture_sigmas(name));
    EXPECT_LE(worst, 1e-6) << name;
    EXPECT_EQ(differ, 0) << name << ": float32 operation order differs from the reference";
    ++checked;
  }
  EXPECT_EQ(checked, 7 * 8 + 4);
}

TEST(Ltx2Scheduler, DefaultIs4096TokensWithTerminalStretch) {
  const Sigmas s = sampling::ltx2_schedule(30);
  EXPECT_EQ(s, sampling::ltx2_schedule(30, 4096));
  ASSERT_EQ(s.size(), 31u);
  EXPECT_NEAR(s.front(), 1.0, 1e-6);  // 1 up to torch's reciprocal-then-multiply rounding
  EXPECT_EQ(s.back(), 0.0f);
  EXPECT_NEAR(s[29], 0.1, 1e-6);  // the last non-zero sigma is stretched to the terminal value
  for (size_t i = 1; i < s.size(); ++i) EXPECT_LT(s[i], s[i - 1]);
  EXPECT_NEAR(sampling::ltx2_shift(4096), 2.05, 1e-12);
  EXPECT_NEAR(sampling::ltx2_shift(1024), 0.95, 1e-12);
  // HQ stage 1 (960x544x121 -> 16*17*30 tokens) shifts further toward high noise.
  EXPECT_GT(sampling::ltx2_schedule(15, 8160)[7], sampling::ltx2_schedule(15)[7]);
}

TEST(Ltx2Scheduler, RejectsBadArguments) {
  EXPECT_THROW(sampling::ltx2_schedule(0), Error);
  EXPECT_THROW(sampling::ltx2_schedule(8, 0), Error);
}

TEST(Linspace, MatchesTorchHalfwaySplit) {
  const std::vector<float> x = sampling::linspace_f32(1.0f, 0.0f, 9);
  EXPECT_EQ(x.front(), 1.0f);
  EXPECT_EQ(x.back(), 0.0f);
  EXPECT_EQ(x[4], 0.5f);
  EXPECT_TRUE(sampling::linspace_f32(0, 1, 0).empty());
  EXPECT_EQ(sampling::linspace_f32(3, 5, 1), std::vector<float>{3.0f});
}

TEST(LinearQuadraticScheduler, MatchesFixture) {
  for (int steps : {4, 8, 30, 40}) {
    const std::string name = "linear_quadratic.steps" + std::to_string(steps);
    const auto [worst, differ] = compare(sampling::linear_quadratic_schedule(steps), fixture_sigmas(name));
    EXPECT_LE(worst, 1e-6) << name;
    EXPECT_EQ(differ, 0) << name;
  }
  EXPECT_EQ(sampling::linear_quadratic_schedule(1), (Sigmas{1.0f, 0.0f}));
  EXPECT_THROW(sampling::linear_quadratic_schedule(0), Error);
  EXPECT_THROW(sampling::linear_quadratic_schedule(8, 0.025, 0), Error);
}

TEST(BetaScheduler, MatchesFixture) {
  for (int steps : {8, 30}) {
    const std::string name = "beta.steps" + std::to_string(steps);
    const auto [worst, differ] = compare(sampling::beta_schedule(steps), fixture_sigmas(name));
    EXPECT_LE(worst, 1e-6) << name;
    EXPECT_EQ(differ, 0) << name;
  }
}

TEST(BetaScheduler, DeduplicatesRepeatedTimesteps) {
  // With many steps the quantiles near p = 1 round to the same table index: fewer sigmas.
  const Sigmas s = sampling::beta_schedule(1000);
  EXPECT_LT(s.size(), 1001u);
  for (size_t i = 1; i + 1 < s.size(); ++i) EXPECT_LT(s[i], s[i - 1]);
}

TEST(BetaDistribution, IncompleteBetaAndQuantileAgreeWithClosedForms) {
  for (double x : {0.0, 0.1, 0.37, 0.5, 0.93, 1.0}) {
    EXPECT_NEAR(sampling::incomplete_beta(1, 1, x), x, 1e-15);
    // I_x(2, 3) = sum_{j=2..4} C(4, j) x^j (1 - x)^(4 - j)
    const double want = 6 * x * x * (1 - x) * (1 - x) + 4 * x * x * x * (1 - x) + x * x * x * x;
    EXPECT_NEAR(sampling::incomplete_beta(2, 3, x), want, 1e-14);
    // I_x(1/2, 1/2) = (2 / pi) asin(sqrt(x))
    EXPECT_NEAR(sampling::incomplete_beta(0.5, 0.5, x), 2 / M_PI * std::asin(std::sqrt(x)), 1e-14);
  }
  for (double p : {1e-6, 0.01, 0.25, 0.5, 0.8, 0.999999}) {
    const double x = sampling::beta_ppf(p, 0.6, 0.6);
    EXPECT_NEAR(sampling::incomplete_beta(0.6, 0.6, x), p, 1e-12) << p;
  }
  // The symmetric median is the inflection point as computed in double (0.5000000000000001).
  EXPECT_EQ(sampling::beta_ppf(0.5, 0.6, 0.6), (1 - 0.6) / (2 - 0.6 - 0.6));
  EXPECT_EQ(std::nearbyint(sampling::beta_ppf(0.5, 0.6, 0.6) * 9999), 5000.0);
  EXPECT_EQ(sampling::beta_ppf(0.0, 0.6, 0.6), 0.0);
  EXPECT_EQ(sampling::beta_ppf(1.0, 0.6, 0.6), 1.0);
  EXPECT_THROW(sampling::beta_ppf(1.5, 0.6, 0.6), Error);
  EXPECT_THROW(sampling::incomplete_beta(0, 1, 0.5), Error);
}

TEST(DistilledSigmas, MatchFixtureConstants) {
  EXPECT_EQ(sampling::distilled_sigmas(), fixture_sigmas("distilled.stage1"));
  EXPECT_EQ(sampling::stage2_distilled_sigmas(), fixture_sigmas("distilled.stage2"));
  EXPECT_EQ(sampling::tdp_distilled_sigmas(), fixture_sigmas("distilled.tdp_stage2"));
  // The distilled list is the 8-step linear-quadratic schedule.
  EXPECT_EQ(sampling::distilled_sigmas(), sampling::linear_quadratic_schedule(8));
}

void expect_guider(const nlohmann::json& j, const sampling::GuiderParams& p, const std::string& where) {
  EXPECT_EQ(j.at("cfg_scale").get<double>(), p.cfg_scale) << where;
  EXPECT_EQ(j.at("stg_scale").get<double>(), p.stg_scale) << where;
  EXPECT_EQ(j.at("stg_blocks").get<std::vector<int>>(), p.stg_blocks) << where;
  EXPECT_EQ(j.at("rescale_scale").get<double>(), p.rescale_scale) << where;
  EXPECT_EQ(j.at("modality_scale").get<double>(), p.modality_scale) << where;
  EXPECT_EQ(j.at("skip_step").get<int>(), p.skip_step) << where;
}

TEST(PipelineParams, PresetsMatchFixtureMetadata) {
  const nlohmann::json pp = test::golden_meta(kFile, "pipeline_params");
  const std::pair<const char*, const sampling::PipelineParams*> presets[] = {
      {"LTX_2_PARAMS (model_version < 2.3 or unset)", &sampling::ltx_2_params()},
      {"LTX_2_3_PARAMS (2.3 <= model_version < 2.4)", &sampling::ltx_2_3_params()},
      {"LTX_2_4_PARAMS (model_version >= 2.4, incl. 2.5)", &sampling::ltx_2_4_params()},
      {"LTX_2_3_HQ_PARAMS (res_2s HQ pipeline)", &sampling::ltx_2_3_hq_params()},
  };
  for (const auto& [key, p] : presets) {
    const nlohmann::json& j = pp.at(key);
    EXPECT_EQ(j.at("seed").get<int64_t>(), p->seed) << key;
    EXPECT_EQ(j.at("stage_1_height").get<int64_t>(), p->stage_1_height) << key;
    EXPECT_EQ(j.at("stage_1_width").get<int64_t>(), p->stage_1_width) << key;
    EXPECT_EQ(j.at("stage_2_height").get<int64_t>(), p->stage_2_height()) << key;
    EXPECT_EQ(j.at("stage_2_width").get<int64_t>(), p->stage_2_width()) << key;
    EXPECT_EQ(j.at("num_frames").get<int64_t>(), p->num_frames) << key;
    EXPECT_EQ(j.at("frame_rate").get<double>(), p->frame_rate) << key;
    EXPECT_EQ(j.at("num_inference_steps").get<int64_t>(), p->num_inference_steps) << key;
    EXPECT_EQ(j.at("default_image_crf").get<int64_t>(), p->default_image_crf) << key;
    expect_guider(j.at("video_guider_params"), p->video_guider, std::string(key) + " video");
    expect_guider(j.at("audio_guider_params"), p->audio_guider, std::string(key) + " audio");
  }
}

TEST(PipelineParams, DetectedFromModelVersion) {
  EXPECT_STREQ(sampling::detect_params("").name, "LTX_2_PARAMS");
  EXPECT_STREQ(sampling::detect_params("garbage").name, "LTX_2_PARAMS");
  EXPECT_STREQ(sampling::detect_params("2.0.0").name, "LTX_2_PARAMS");
  EXPECT_STREQ(sampling::detect_params("2.2.9").name, "LTX_2_PARAMS");
  EXPECT_STREQ(sampling::detect_params("2.3").name, "LTX_2_3_PARAMS");
  EXPECT_STREQ(sampling::detect_params("2.3.0").name, "LTX_2_3_PARAMS");
  EXPECT_STREQ(sampling::detect_params("2.3.rc1").name, "LTX_2_3_PARAMS");
  EXPECT_STREQ(sampling::detect_params("2.4-rc2").name, "LTX_2_4_PARAMS");  // '-' counts as '.'
  EXPECT_STREQ(sampling::detect_params("2.5.0").name, "LTX_2_4_PARAMS");
  EXPECT_STREQ(sampling::detect_params("3").name, "LTX_2_4_PARAMS");
  EXPECT_STREQ(sampling::detect_params("2").name, "LTX_2_PARAMS");  // (2,) < (2, 3)
}

TEST(PipelineParams, AncestralSamplerRuleMatchesFixtureMetadata) {
  const nlohmann::json d = test::golden_meta(kFile, "distilled_pipeline");
  EXPECT_EQ(d.at("ANCESTRAL_SAMPLER_SINCE_VERSION").get<std::vector<int>>(), sampling::kAncestralSamplerSinceVersion);
  EXPECT_EQ(d.at("ANCESTRAL_ETA").get<double>(), sampling::kAncestralEta);
  EXPECT_EQ(d.at("ANCESTRAL_S_NOISE").get<double>(), sampling::kAncestralSNoise);
  EXPECT_EQ(d.at("ANCESTRAL_NOISE_SEED_OFFSET").get<int64_t>(), sampling::kAncestralNoiseSeedOffset);
  EXPECT_FALSE(sampling::use_ancestral_sampler("2.3.0"));
  EXPECT_FALSE(sampling::use_ancestral_sampler(""));
  EXPECT_TRUE(sampling::use_ancestral_sampler("2.5.0"));
  EXPECT_TRUE(sampling::use_ancestral_sampler("2.5"));
}

}  // namespace
}  // namespace ltx::schedules_test
