// The pipeline API's model-free parts: names, presets, LoRA strengths per stage, validation.
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using pipelines::PipelineKind;
using pipelines::Stage;

TEST(PipelineApi, NamesRoundTripAndUnknownNamesListTheValidOnes) {
  for (const auto& n : pipelines::pipeline_names())
    EXPECT_EQ(pipelines::pipeline_name(pipelines::parse_pipeline_kind(n)), n);
  EXPECT_EQ(pipelines::parse_pipeline_kind("Two_Stage_HQ"), PipelineKind::TwoStageHQ);
  EXPECT_ERROR_HAS(pipelines::parse_pipeline_kind("three-stage"), "distilled, one-stage, two-stage, two-stage-hq");
}

TEST(PipelineApi, DefaultRequestsFollowTheReferencePresets) {
  auto one = pipelines::default_request(PipelineKind::OneStage, "2.3.0");
  EXPECT_EQ(one.height, 512);
  EXPECT_EQ(one.width, 768);
  EXPECT_EQ(one.num_inference_steps, 30);
  EXPECT_EQ(one.video_guider.stg_blocks, std::vector<int>{28});
  EXPECT_DOUBLE_EQ(one.audio_guider.cfg_scale, 7.0);

  auto two = pipelines::default_request(PipelineKind::TwoStage, "");  // unversioned: LTX-2 preset
  EXPECT_EQ(two.height, 1024);
  EXPECT_EQ(two.width, 1536);
  EXPECT_EQ(two.num_inference_steps, 40);
  EXPECT_EQ(two.video_guider.stg_blocks, std::vector<int>{29});

  auto hq = pipelines::default_request(PipelineKind::TwoStageHQ, "2.3");
  EXPECT_EQ(hq.height, 1088);
  EXPECT_EQ(hq.width, 1920);
  EXPECT_EQ(hq.num_inference_steps, 15);
  EXPECT_DOUBLE_EQ(hq.video_guider.stg_scale, 0.0);
  EXPECT_DOUBLE_EQ(hq.video_guider.rescale_scale, 0.45);
  EXPECT_DOUBLE_EQ(hq.audio_guider.rescale_scale, 1.0);

  auto dist = pipelines::default_request(PipelineKind::Distilled, "2.3");
  EXPECT_EQ(dist.height, 1024);
  EXPECT_FALSE(sampling::MultiModalGuider(dist.video_guider).do_unconditional_generation());
}

TEST(PipelineApi, DistilledLoraStrengthPerStage) {
  auto two = pipelines::default_request(PipelineKind::TwoStage);
  EXPECT_FALSE(pipelines::distilled_lora_strength(PipelineKind::TwoStage, Stage::One, two));
  EXPECT_EQ(pipelines::distilled_lora_strength(PipelineKind::TwoStage, Stage::Two, two), 1.0);
  auto hq = pipelines::default_request(PipelineKind::TwoStageHQ);
  EXPECT_EQ(pipelines::distilled_lora_strength(PipelineKind::TwoStageHQ, Stage::One, hq), 0.25);
  EXPECT_EQ(pipelines::distilled_lora_strength(PipelineKind::TwoStageHQ, Stage::Two, hq), 0.5);
  auto dist = pipelines::default_request(PipelineKind::Distilled);
  EXPECT_FALSE(pipelines::distilled_lora_strength(PipelineKind::Distilled, Stage::Two, dist));
  EXPECT_FALSE(pipelines::distilled_lora_strength(PipelineKind::OneStage, Stage::One, dist));
}

TEST(PipelineApi, ValidationNamesTheProblem) {
  pipelines::Components none;
  auto r = pipelines::default_request(PipelineKind::TwoStage);
  r.num_frames = 120;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::TwoStage, r, none), "not 8k + 1");
  r.num_frames = 121;
  r.height = 544;  // a multiple of 32, not of 64
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::TwoStage, r, none), "multiples of 64");
  r.height = 1024;
  pipelines::ImageConditioning im;
  im.path = "x.png";
  im.frame_index = 121;
  r.images.push_back(im);
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::TwoStage, r, none), "frame index 121");
  r.images[0].frame_index = 0;
  r.images[0].strength = 1.5;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::TwoStage, r, none), "strength");
  r.images.clear();
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::TwoStage, r, none), "no transformer");

  auto one = pipelines::default_request(PipelineKind::OneStage);
  one.height = 544;  // fine for one stage; fails later only on the missing transformer
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::OneStage, one, none), "no transformer");
}

}  // namespace
}  // namespace ltx
