// Step caching through a guided pipeline on the tiny e2e model set (tests/fixtures/e2e/): off and
// a zero threshold leave the latents' bits alone, a huge threshold reuses every step between the
// warm-up and the last one and says so, and the pipelines without a guided stage refuse it.
#include <gtest/gtest.h>

#include <cstring>

#include "models/transformer/step_cache.h"
#include "pipelines/e2e_fixture.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx::step_cache_e2e_test {
namespace {

namespace mt = models::transformer;
using pipelines::PipelineKind;
using namespace e2e_fixture;  // NOLINT(google-build-using-namespace): the shared fixture's names

using test::same_bits;

mt::StepCacheParams fbcache(double threshold, int64_t warmup) {
  mt::StepCacheParams p;
  p.mode = mt::StepCacheMode::FirstBlock;
  p.threshold = threshold;
  p.warmup_steps = warmup;
  return p;
}

pipelines::GenerationResult one_stage(const pipelines::GenerationRequest& r) {
  const Models& m = models_();
  return pipelines::run_pipeline(PipelineKind::OneStage, r, m.components(), m.contexts);
}

TEST(StepCacheE2E, OffAndThresholdZeroGiveTheUncachedLatentsBitForBit) {
  pipelines::GenerationRequest r = e2e_request(PipelineKind::OneStage);
  const pipelines::GenerationResult off = one_stage(r);
  EXPECT_TRUE(off.step_cache.empty());
  r.step_cache = fbcache(0.0, 0);
  const pipelines::GenerationResult zero = one_stage(r);
  EXPECT_TRUE(same_bits(zero.video_latent, off.video_latent));
  EXPECT_TRUE(same_bits(zero.audio_latent, off.audio_latent));
  ASSERT_EQ(zero.step_cache.size(), 1u);
  EXPECT_EQ(zero.step_cache[0].stage, "stage 1");
  EXPECT_EQ(zero.step_cache[0].computed, r.num_inference_steps);
  EXPECT_EQ(zero.step_cache[0].reused, 0);
}

TEST(StepCacheE2E, TwoStageCachesStageOneOnlyAndThresholdZeroKeepsItsBits) {
  const Models& m = models_();
  pipelines::GenerationRequest r = e2e_request(PipelineKind::TwoStage);
  const pipelines::Components c = m.components(/*lora_in_stage_2=*/true);
  const pipelines::GenerationResult off = pipelines::run_pipeline(PipelineKind::TwoStage, r, c, m.contexts);
  r.step_cache = fbcache(0.0, 0);
  const pipelines::GenerationResult zero = pipelines::run_pipeline(PipelineKind::TwoStage, r, c, m.contexts);
  EXPECT_TRUE(same_bits(zero.video_latent, off.video_latent));
  EXPECT_TRUE(same_bits(zero.audio_latent, off.audio_latent));
  ASSERT_EQ(zero.step_cache.size(), 1u);  // the distilled stage 2 runs without it
  EXPECT_EQ(zero.step_cache[0].stage, "stage 1");
  EXPECT_EQ(zero.step_cache[0].computed, r.num_inference_steps);
}

TEST(StepCacheE2E, AHugeThresholdReusesEveryStepBetweenTheWarmUpAndTheLast) {
  pipelines::GenerationRequest r = e2e_request(PipelineKind::OneStage);
  r.num_inference_steps = 6;
  r.step_cache = fbcache(1e9, 2);
  const pipelines::GenerationResult out = one_stage(r);
  ASSERT_EQ(out.step_cache.size(), 1u);
  EXPECT_EQ(out.step_cache[0].computed, 3);  // steps 0, 1 (warm-up) and 5 (the last)
  EXPECT_EQ(out.step_cache[0].reused, 3);
  EXPECT_EQ(pipelines::format_step_cache(r.step_cache, out.step_cache),
            "step cache fbcache (threshold 1e+09, warm-up 2 steps, first 1 block): stage 1 computed 3 of 6 "
            "model calls, reused 3");
  r.step_cache = {};
  const pipelines::GenerationResult off = one_stage(r);
  EXPECT_FALSE(same_bits(out.video_latent, off.video_latent));
}

TEST(StepCacheE2E, Res2sMidpointCallsBelongToTheirStep) {
  const Models& m = models_();
  pipelines::GenerationRequest r = e2e_request(PipelineKind::TwoStageHQ);
  r.step_cache = fbcache(1e9, 1);
  const pipelines::GenerationResult out =
      pipelines::run_pipeline(PipelineKind::TwoStageHQ, r, m.components(), m.contexts);
  ASSERT_EQ(out.step_cache.size(), 1u);
  // 4 steps of two calls each, then the x0 call at 0.0011: step 0's two calls (warm-up) and that
  // last call computed, the six calls of steps 1-3 reused.
  EXPECT_EQ(out.step_cache[0].computed, 3);
  EXPECT_EQ(out.step_cache[0].reused, 6);
}

TEST(StepCacheE2E, PipelinesWithoutAGuidedStageAndSplitPassesRefuseIt) {
  const pipelines::Components none;
  for (PipelineKind kind : {PipelineKind::Distilled, PipelineKind::Retake, PipelineKind::IcLora}) {
    pipelines::GenerationRequest r = pipelines::default_request(kind, "2.3.0");
    r.step_cache = fbcache(0.1, 8);
    EXPECT_ERROR_HAS(pipelines::validate_request(kind, r, none), "--cache fbcache: the ");
    EXPECT_ERROR_HAS(pipelines::validate_request(kind, r, none), "use --cache none");
  }
  pipelines::GenerationRequest r = pipelines::default_request(PipelineKind::TwoStage, "2.3.0");
  r.step_cache = fbcache(0.1, 8);
  r.max_batch_size = 1;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::TwoStage, r, none), "--max-batch-size 1");
  r.max_batch_size = 0;
  r.step_cache.threshold = -1;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::TwoStage, r, none), "--cache-threshold -1");
}

TEST(StepCacheE2E, TheCacheIsPartOfTheBatchKey) {
  pipelines::GenerationRequest r = pipelines::default_request(PipelineKind::TwoStage, "2.3.0");
  const std::string off = pipelines::batch_key(PipelineKind::TwoStage, r);
  r.step_cache = fbcache(0.1, 8);
  const std::string on = pipelines::batch_key(PipelineKind::TwoStage, r);
  r.step_cache.threshold = 0.2;
  EXPECT_NE(off, on);
  EXPECT_NE(on, pipelines::batch_key(PipelineKind::TwoStage, r));
}

}  // namespace
}  // namespace ltx::step_cache_e2e_test
