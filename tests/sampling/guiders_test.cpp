#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "sampling/guiders.h"
#include "sampling/params.h"
#include "sampling/sampling_fixtures.h"

namespace ltx::guiders_test {
namespace {

using sampling::GuiderParams;
using sampling::MultiModalGuider;

constexpr const char* kFile = "sampling_guiders";
constexpr double kTol = 1e-6;  // golden README: guiders, max|x - ref| / max|ref|

Tensor in(const std::string& name) { return test::golden_tensor(kFile, name); }

GuiderParams params_from(const nlohmann::json& j) {
  GuiderParams p;
  p.cfg_scale = j.at("cfg_scale").get<double>();
  p.stg_scale = j.at("stg_scale").get<double>();
  p.stg_blocks = j.at("stg_blocks").get<std::vector<int>>();
  p.rescale_scale = j.at("rescale_scale").get<double>();
  p.modality_scale = j.at("modality_scale").get<double>();
  p.skip_step = j.at("skip_step").get<int>();
  return p;
}

TEST(MultiModalGuider, MatchesFixtureForEveryParameterSet) {
  const nlohmann::json entries = test::golden_meta(kFile, "entries");
  const char* names[] = {"ltx2_video", "ltx2_audio", "ltx23_video", "hq_video", "hq_audio",
                         "cfg_only", "stg_only_norescale", "custom"};
  for (const char* n : names) {
    const std::string key = std::string("multimodal.") + n;
    const nlohmann::json& e = entries.at(key);
    const MultiModalGuider g(params_from(e.at("params")));
    const Tensor got = g.calculate(in("in.cond"), in("in.uncond"), in("in.ptb"), in("in.mod"));
    EXPECT_LE(test::max_rel_err(got, in(key)), kTol) << key;
    const nlohmann::json& f = e.at("flags");
    EXPECT_EQ(g.do_unconditional_generation(), f.at("do_unconditional_generation").get<bool>()) << key;
    EXPECT_EQ(g.do_perturbed_generation(), f.at("do_perturbed_generation").get<bool>()) << key;
    EXPECT_EQ(g.do_isolated_modality_generation(), f.at("do_isolated_modality_generation").get<bool>()) << key;
  }
}

TEST(MultiModalGuider, PipelinePresetsAreTheFixtureParams) {
  const nlohmann::json entries = test::golden_meta(kFile, "entries");
  EXPECT_EQ(params_from(entries.at("multimodal.ltx2_video").at("params")), sampling::ltx_2_params().video_guider);
  EXPECT_EQ(params_from(entries.at("multimodal.ltx2_audio").at("params")), sampling::ltx_2_params().audio_guider);
  EXPECT_EQ(params_from(entries.at("multimodal.ltx23_video").at("params")), sampling::ltx_2_3_params().video_guider);
  EXPECT_EQ(params_from(entries.at("multimodal.hq_video").at("params")), sampling::ltx_2_3_hq_params().video_guider);
  EXPECT_EQ(params_from(entries.at("multimodal.hq_audio").at("params")), sampling::ltx_2_3_hq_params().audio_guider);
}

TEST(MultiModalGuider, PassesThatWereNotRunCountAsZero) {
  const nlohmann::json e = test::golden_meta(kFile, "entries").at("multimodal.cfg_rescale_floats");
  const MultiModalGuider g(params_from(e.at("params")));
  const Tensor got = g.calculate(in("in.cond"), in("in.uncond"), std::nullopt, std::nullopt);
  EXPECT_LE(test::max_rel_err(got, in("multimodal.cfg_rescale_floats")), kTol);
}

TEST(MultiModalGuider, RescaleUsesStdOverTheWholeBatch) {
  const MultiModalGuider g(sampling::ltx_2_params().video_guider);
  const Tensor got = g.calculate(in("in.cond_b2"), in("in.uncond_b2"), in("in.ptb_b2"), in("in.mod_b2"));
  EXPECT_LE(test::max_rel_err(got, in("multimodal.ltx2_video.b2")), kTol);
  // Per-sample rescaling would differ: guide each sample alone and compare.
  const Tensor s0 = g.calculate(in("in.cond_b2").narrow(0, 0, 1), in("in.uncond_b2").narrow(0, 0, 1),
                                in("in.ptb_b2").narrow(0, 0, 1), in("in.mod_b2").narrow(0, 0, 1));
  EXPECT_GT(test::max_abs_diff(s0, got.narrow(0, 0, 1)), 1e-5);
}

TEST(MultiModalGuider, DefaultParamsReturnCondAndSkipStepsFollowThePeriod) {
  const Tensor c = test::random_tensor({1, 5, 3}, 4);
  const MultiModalGuider plain;
  EXPECT_EQ(test::max_abs_diff(plain.calculate(c, std::nullopt, std::nullopt, std::nullopt), c), 0.0);
  EXPECT_FALSE(plain.do_unconditional_generation());
  EXPECT_FALSE(plain.do_perturbed_generation());
  EXPECT_FALSE(plain.do_isolated_modality_generation());
  GuiderParams p;
  p.skip_step = 2;
  const MultiModalGuider g(p);
  EXPECT_FALSE(g.should_skip_step(0));
  EXPECT_TRUE(g.should_skip_step(1));
  EXPECT_TRUE(g.should_skip_step(2));
  EXPECT_FALSE(g.should_skip_step(3));
  EXPECT_FALSE(plain.should_skip_step(1));
  EXPECT_THROW(g.calculate(c, test::random_tensor({1, 5, 4}, 1), std::nullopt, std::nullopt), Error);
  // The result keeps cond's dtype; strided inputs read the same values.
  EXPECT_EQ(plain.calculate(c.to(DType::BF16), std::nullopt, std::nullopt, std::nullopt).dtype(), DType::BF16);
  const MultiModalGuider preset(sampling::ltx_2_params().video_guider);
  const Tensor u = test::random_tensor({1, 5, 3}, 5), p2 = test::random_tensor({1, 5, 3}, 6),
               m = test::random_tensor({1, 5, 3}, 7);
  EXPECT_EQ(test::max_abs_diff(preset.calculate(test::non_contiguous_copy(c), test::non_contiguous_copy(u), p2, m),
                               preset.calculate(c, u, p2, m)),
            0.0);
}

TEST(SingleGuiders, MatchFixtureDeltas) {
  EXPECT_LE(test::max_rel_err(sampling::CFGGuider{3.0}.delta(in("in.cond"), in("in.uncond")), in("cfg.delta")), kTol);
  EXPECT_LE(test::max_rel_err(sampling::CFGStarRescalingGuider{3.0}.delta(in("in.cond"), in("in.uncond")),
                              in("cfgstar.delta")),
            kTol);
  EXPECT_LE(test::max_rel_err(sampling::STGGuider{1.0}.delta(in("in.cond"), in("in.ptb")), in("stg.delta")), kTol);
  EXPECT_LE(test::max_rel_err(sampling::projection_coef(in("in.cond"), in("in.uncond")),
                              in("projection_coef.cond_on_uncond")),
            kTol);
  const sampling::LtxAPGGuider apg{3.0, 0.5, 0.0}, apg_thresh{3.0, 0.5, 20.0};
  EXPECT_LE(test::max_rel_err(apg.delta(in("in.apg_cond"), in("in.apg_uncond")), in("apg.delta")), kTol);
  EXPECT_LE(test::max_rel_err(apg_thresh.delta(in("in.apg_cond"), in("in.apg_uncond")), in("apg.delta.thresh")), kTol);
  // The threshold is active on this data (otherwise the two fixtures would be equal).
  EXPECT_GT(test::max_abs_diff(in("apg.delta"), in("apg.delta.thresh")), 1e-3);
  EXPECT_TRUE(sampling::CFGGuider{3.0}.enabled());
  EXPECT_FALSE(sampling::STGGuider{0.0}.enabled());
}

TEST(SingleGuiders, LegacyApgKeepsARunningAverageAcrossCalls) {
  sampling::LegacyStatefulAPGGuider g(2.0, 0.5, 20.0, 0.5);
  for (int i = 0; i < 3; ++i) {
    const std::string s = std::to_string(i);
    const Tensor got = g.delta(in("in.legacy_apg.cond" + s), in("in.legacy_apg.uncond" + s));
    EXPECT_LE(test::max_rel_err(got, in("legacy_apg.delta" + s)), kTol) << i;
  }
  // A fresh guider on call 2's inputs gives something else (no history).
  sampling::LegacyStatefulAPGGuider fresh(2.0, 0.5, 20.0, 0.5);
  EXPECT_GT(test::max_abs_diff(fresh.delta(in("in.legacy_apg.cond2"), in("in.legacy_apg.uncond2")),
                               in("legacy_apg.delta2")),
            1e-4);
}

TEST(MultiModalGuiderFactory, SigmaBinLookupMatchesFixture) {
  const nlohmann::json f = test::golden_meta(kFile, "factory_lookup");
  GuiderParams a, b, c;
  a.cfg_scale = 5.0;
  b.cfg_scale = 3.0;
  c.cfg_scale = 1.5;
  const auto fac = sampling::MultiModalGuiderFactory::from_bins({{0.5, b}, {1.0, a}, {0.1, c}});
  for (const auto& [sigma, cfg] : f.at("result").items())
    EXPECT_EQ(fac.params(std::stod(sigma)).cfg_scale, cfg.get<double>()) << "sigma " << sigma;
  EXPECT_EQ(sampling::MultiModalGuiderFactory::constant(b).params(123.0).cfg_scale, 3.0);
  EXPECT_THROW(sampling::MultiModalGuiderFactory::from_bins({}), Error);
  EXPECT_THROW(sampling::MultiModalGuiderFactory::from_bins({{0.5, a}, {0.5, b}}), Error);
}

TEST(GuidancePlan, PassesFollowTheGuidersFlagsInBatchOrder) {
  using Kind = sampling::GuidancePass::Kind;
  const MultiModalGuider video(sampling::ltx_2_3_params().video_guider), audio(sampling::ltx_2_3_params().audio_guider);
  const sampling::GuidancePlan full = sampling::plan_guidance(video, audio, true, true, 0);
  ASSERT_EQ(full.passes.size(), 4u);
  EXPECT_EQ(full.passes[0].kind, Kind::Cond);
  EXPECT_EQ(full.passes[1].kind, Kind::Uncond);
  EXPECT_TRUE(full.passes[1].negative_context);
  EXPECT_EQ(full.passes[2].kind, Kind::Perturbed);
  EXPECT_EQ(full.passes[2].skip_video_self_attn, std::vector<int>{28});
  EXPECT_EQ(full.passes[2].skip_audio_self_attn, std::vector<int>{28});
  EXPECT_EQ(full.passes[3].kind, Kind::IsolatedModality);
  EXPECT_TRUE(full.passes[3].skip_cross_modal_attn);
  EXPECT_STREQ(full.passes[3].name(), "mod");

  // HQ: STG off -> no perturbed pass.
  const MultiModalGuider hv(sampling::ltx_2_3_hq_params().video_guider), ha(sampling::ltx_2_3_hq_params().audio_guider);
  const sampling::GuidancePlan hq = sampling::plan_guidance(hv, ha, true, true, 0);
  EXPECT_EQ(hq.passes.size(), 3u);
  EXPECT_EQ(hq.index_of(Kind::Perturbed), -1);
  EXPECT_EQ(hq.index_of(Kind::IsolatedModality), 2);

  // Positive-only guiders: just cond, unless CFG++ forces an uncond pass.
  const MultiModalGuider plain;
  EXPECT_EQ(sampling::plan_guidance(plain, plain, true, false, 0).passes.size(), 1u);
  EXPECT_EQ(sampling::plan_guidance(plain, plain, true, false, 0, true).index_of(Kind::Uncond), 1);
  EXPECT_EQ(sampling::plan_guidance(plain, plain, false, false, 0, true).passes.size(), 1u);

  GuiderParams skip;
  skip.skip_step = 1;
  const sampling::GuidancePlan skipped = sampling::plan_guidance(MultiModalGuider(skip), MultiModalGuider(skip), true, true, 1);
  EXPECT_TRUE(skipped.skip_all);
  EXPECT_TRUE(skipped.passes.empty());
}

}  // namespace
}  // namespace ltx::guiders_test
