// The DFR pipeline's model-free parts: its helpers (slot seeds, the carry-forward keyframe bag,
// anchor conditionings, tile-local images, frames / sigmas / LoRA metadata) and the validation
// errors, including the generated-keyframe requests of the other pipelines.
#include <cstdio>
#include <filesystem>

#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "pipelines/dfr.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace dfr = pipelines::dfr;
using pipelines::PipelineKind;
using pipelines::Stage;

// [1, 1, T, 1, 1] with value 10 * t + tag at frame t.
Tensor frames(int64_t t, double tag = 0.0) {
  return test::make_ref(Shape{1, 1, t, 1, 1}, [&](const std::vector<int64_t>& i) { return 10.0 * i[2] + tag; })
      .to(DType::F32);
}

std::vector<float> values(const Tensor& t) { return t.to_float_vector(); }

TEST(Dfr, OutputFramesTemporalSigmasAndNames) {
  EXPECT_EQ(dfr::output_num_frames(121, 0), 121);
  EXPECT_EQ(dfr::output_num_frames(121, 1), 241);
  EXPECT_EQ(dfr::output_num_frames(9, 2), 33);
  EXPECT_EQ(dfr::temporal_sigmas(), (sampling::Sigmas{0.975f, 0.909375f, 0.725f, 0.421875f, 0.0f}));
  EXPECT_EQ(pipelines::parse_pipeline_kind("DFR"), PipelineKind::Dfr);
  EXPECT_FALSE(pipelines::uses_guidance(PipelineKind::Dfr));
  EXPECT_TRUE(pipelines::is_two_stage(PipelineKind::Dfr));
}

TEST(Dfr, DefaultRequestAndLoraStrengthsPerStage) {
  auto r = pipelines::default_request(PipelineKind::Dfr, "2.5.0");
  EXPECT_EQ(r.height, 1024);
  EXPECT_EQ(r.width, 1536);
  EXPECT_EQ(r.num_frames, 121);
  EXPECT_EQ(r.temporal_upsample_rounds, 0);
  EXPECT_FALSE(sampling::MultiModalGuider(r.video_guider).do_unconditional_generation());
  r.distilled_lora_strengths = {0.7, 0.8};
  EXPECT_EQ(pipelines::distilled_lora_strength(PipelineKind::Dfr, Stage::One, r), 0.7);
  EXPECT_EQ(pipelines::distilled_lora_strength(PipelineKind::Dfr, Stage::Two, r), 0.8);
  EXPECT_EQ(pipelines::distilled_lora_strength(PipelineKind::Dfr, Stage::Temporal, r), 0.7);
  EXPECT_FALSE(pipelines::detailing_lora_strength(PipelineKind::Dfr, Stage::Two, r));
  r.detailing_lora_strength = 0.9;
  EXPECT_EQ(pipelines::detailing_lora_strength(PipelineKind::Dfr, Stage::Two, r), 0.9);
  EXPECT_FALSE(pipelines::detailing_lora_strength(PipelineKind::Dfr, Stage::One, r));
  EXPECT_FALSE(pipelines::detailing_lora_strength(PipelineKind::Dfr, Stage::Temporal, r));
  EXPECT_FALSE(pipelines::detailing_lora_strength(PipelineKind::TwoStage, Stage::Two, r));
}

TEST(Dfr, StageLorasFollowTheReferenceOrder) {
  const auto file = lora::LoraFile::open(test::fixture("e2e/ltx23_tiny_distilled_lora.safetensors"));
  const lora::LoraSet user = {{file, 0.1}}, distilled = {{file, 0.2}}, detailing = {{file, 0.3}};
  auto strengths = [](const lora::LoraSet& s) {
    std::vector<double> out;
    for (const auto& l : s) out.push_back(l.strength);
    return out;
  };
  EXPECT_EQ(strengths(dfr::stage_loras(Stage::One, user, distilled, detailing)), (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(strengths(dfr::stage_loras(Stage::Two, user, distilled, detailing)), (std::vector<double>{0.1, 0.2, 0.3}));
  EXPECT_EQ(strengths(dfr::stage_loras(Stage::Temporal, user, distilled, detailing)), (std::vector<double>{0.1, 0.2}));
}

TEST(Dfr, SlotSeedsAreTheNearestVideoLatentFrames) {
  const Tensor video = frames(7);  // latents of a 49-frame tile
  // 24 -> latent 3, 0 -> 0, 48 -> 6, 100 -> clamped to 6; 4 / 8 = 0.5 rounds half to even (0),
  // 12 / 8 = 1.5 -> 2.
  const Tensor seeds = dfr::slot_initials_from_video(video, {24, 0, 48, 100, 4, 12});
  ASSERT_EQ(seeds.shape(), (Shape{1, 1, 6, 1, 1}));
  EXPECT_EQ(values(seeds), (std::vector<float>{30, 0, 60, 60, 0, 20}));
  EXPECT_ERROR_HAS(dfr::slot_initials_from_video(Tensor::zeros({1, 7, 1, 1}), {0}), "[B, C, F, H, W]");
}

TEST(Dfr, CarryForwardBagMergesAnchorsAndSlotsInFrameOrder) {
  // Anchors at 48, 96 (values 0, 10); slots at 24, 72, 96 (values 1, 11, 21): the slot wins 96.
  const auto bag = dfr::merge_carry_forward_keyframes({48, 96}, frames(2), {24, 72, 96}, frames(3, 1.0));
  EXPECT_EQ(bag.positions, (std::vector<int64_t>{24, 48, 72, 96}));
  EXPECT_EQ(values(bag.latents), (std::vector<float>{1, 0, 11, 21}));
  // Either side may be empty.
  EXPECT_EQ(dfr::merge_carry_forward_keyframes({48}, frames(1), {}, Tensor()).positions, (std::vector<int64_t>{48}));
  EXPECT_ERROR_HAS(dfr::merge_carry_forward_keyframes({}, Tensor(), {}, Tensor()), "bag is empty");
  EXPECT_ERROR_HAS(dfr::merge_carry_forward_keyframes({48}, Tensor(), {}, Tensor()), "missing anchor keyframe");
  EXPECT_ERROR_HAS(dfr::merge_carry_forward_keyframes({48, 96}, frames(1), {}, Tensor()), "do not hold 2 keyframes");
}

TEST(Dfr, AnchorConditioningsAppendOneGuidingKeyframePerLatent) {
  const auto items = dfr::keyframe_conditionings_from_latents(frames(3), {0, 48, 96}, 0.95);
  ASSERT_EQ(items.size(), 3u);
  for (const auto& it : items) EXPECT_EQ(it->name(), "VideoConditionByKeyframeIndex");
  // Applied to a 1x1 97-frame target: three single tokens appended, mask 1 - 0.95, clean = the latents,
  // the first at time [0, 1) / fps, the others [48, 49) / fps and [96, 97) / fps.
  sampling::VideoLatentTools tools;
  tools.target = sampling::VideoLatentShape{1, 1, 13, 1, 1};
  tools.fps = 48.0;
  sampling::LatentState s = tools.create_initial_state(DType::F32);
  for (const auto& it : items) s = it->apply(s, tools);
  ASSERT_EQ(s.tokens(), 16);
  EXPECT_EQ(values(s.clean_latent.narrow(1, 13, 3)), (std::vector<float>{0, 10, 20}));
  EXPECT_NEAR(s.denoise_mask.narrow(1, 13, 3).to_float_vector()[0], 0.05, 1e-6);
  const std::vector<float> pos = s.positions.select(1, 0).narrow(1, 13, 3).contiguous().to_float_vector();
  EXPECT_EQ(pos, (std::vector<float>{0.0f, 1.0f / 48.0f, 1.0f, 49.0f / 48.0f, 2.0f, 97.0f / 48.0f}));
  EXPECT_ERROR_HAS(dfr::keyframe_conditionings_from_latents(frames(2), {0, 48, 96}, 1.0), "expected 3 keyframe");
}

TEST(Dfr, TileImagesAreTileLocal) {
  std::vector<pipelines::PreparedImage> images(3);
  images[0].frame_index = 0;
  images[1].frame_index = 96;
  images[2].frame_index = 200;
  const dfr::TileRange first{0, 144, 0, 19, {48, 96, 144}, {24, 72, 120}, 0};
  const dfr::TileRange second{96, 240, 12, 31, {96, 144, 192, 240}, {120, 168, 216}, 7};
  // A tile at frame 0 keeps every image as given.
  auto t0 = dfr::tile_images(images, first);
  ASSERT_EQ(t0.size(), 3u);
  EXPECT_EQ(t0[2].frame_index, 200);
  // Others keep the images inside their window, moved to local frames (96 -> 0, 200 -> 104).
  auto t1 = dfr::tile_images(images, second);
  ASSERT_EQ(t1.size(), 2u);
  EXPECT_EQ(t1[0].frame_index, 0);
  EXPECT_EQ(t1[1].frame_index, 104);
}

TEST(Dfr, DetailingDownscaleFactorComesFromTheLoraMetadata) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string with = (dir / "ltx_dfr_lora_meta.safetensors").string();
  const std::string without = (dir / "ltx_dfr_lora_plain.safetensors").string();
  const std::string bad = (dir / "ltx_dfr_lora_bad.safetensors").string();
  const std::vector<std::pair<std::string, Tensor>> t = {{"x.lora_A.weight", Tensor::zeros({1, 2})}};
  io::write_safetensors(with, t, {{"reference_downscale_factor", "4"}});
  io::write_safetensors(without, t);
  io::write_safetensors(bad, t, {{"reference_downscale_factor", "two"}});
  EXPECT_EQ(dfr::read_detailing_downscale_factor(with), 4);
  EXPECT_EQ(dfr::read_detailing_downscale_factor(without), 2);
  EXPECT_ERROR_HAS(dfr::read_detailing_downscale_factor(bad), "is not a positive integer");
  std::remove(with.c_str());
  std::remove(without.c_str());
  std::remove(bad.c_str());
}

struct ValidationModels {
  // LTX-2.3: no keyframe embedding; LTX-2.5: with it.
  models::transformer::LTXModel ltx23 = models::transformer::LTXModel::from_files(
      {test::fixture("e2e/ltx23_tiny.safetensors")}, models::transformer::LTXModelType::AudioVideo);
  models::transformer::LTXModel ltx25 = models::transformer::LTXModel::from_files(
      {test::fixture("ltx25.weights.safetensors")}, models::transformer::LTXModelType::AudioVideo);
  models::upsampler::LatentUpsampler spatial =
      models::upsampler::LatentUpsampler::from_file(test::fixture("upsampler_x2.weights.safetensors"));
  models::upsampler::LatentUpsampler temporal =
      models::upsampler::LatentUpsampler::from_file(test::fixture("upsampler_temporal_x2.weights.safetensors"));
  models::video_vae::PerChannelStatistics stats;
};

TEST(Dfr, ValidationGivesTheReferencesErrors) {
  const ValidationModels m;
  pipelines::Components c;
  c.transformer = &m.ltx25;
  c.spatial_upsampler = &m.spatial;
  c.latent_statistics = &m.stats;
  auto r = pipelines::default_request(PipelineKind::Dfr, "2.5.0");
  r.height = 128;
  r.width = 128;
  r.num_frames = 17;
  EXPECT_NO_THROW(pipelines::validate_request(PipelineKind::Dfr, r, c));

  r.temporal_upsample_rounds = 3;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "must be 0, 1 or 2, got 3");
  r.temporal_upsample_rounds = 1;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "pass --temporal-upsampler-path");
  c.temporal_upsampler = &m.spatial;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "must upsample time only");
  c.temporal_upsampler = &m.temporal;
  EXPECT_NO_THROW(pipelines::validate_request(PipelineKind::Dfr, r, c));
  c.spatial_upsampler = &m.temporal;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "spatial upsampler also upsamples time");
  c.spatial_upsampler = &m.spatial;

  r.num_generated_keyframes = 2;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "drop --num-generated-keyframes");
  r.num_generated_keyframes = 0;
  r.num_frames = 1;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "at least 2 pixel frames");
  r.num_frames = 17;
  r.width = 96;  // stage 1 runs at half size
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "positive multiples of 64");
  r.width = 128;
  r.detailing_downscale_factor = 0;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "downscale factor 0 must be >= 1");
  r.detailing_downscale_factor = 2;

  c.transformer = &m.ltx23;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "use_keyframes_abs_pos_embedding");
  c.spatial_upsampler = nullptr;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Dfr, r, c), "--spatial-upsampler-path");
}

TEST(Dfr, GeneratedKeyframeRequestsOfTheOtherPipelinesAreChecked) {
  const ValidationModels m;
  pipelines::Components c;
  c.transformer = &m.ltx23;
  c.spatial_upsampler = &m.spatial;
  c.latent_statistics = &m.stats;
  auto r = pipelines::default_request(PipelineKind::Distilled, "2.3.0");
  r.num_generated_keyframes = 3;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Distilled, r, c),
                   "does not set use_keyframes_abs_pos_embedding");
  c.transformer = &m.ltx25;
  EXPECT_NO_THROW(pipelines::validate_request(PipelineKind::Distilled, r, c));
  r.num_generated_keyframes = -1;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Distilled, r, c), "must be >= 0");
  r.num_generated_keyframes = 120;  // 121 frames hold at most 119 interior keyframes
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Distilled, r, c), "num_keyframes + 2 frames");
  r.num_generated_keyframes = 1;
  r.generated_keyframe_positions = {40};
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Distilled, r, c), "not both");
  r.num_generated_keyframes = 0;
  r.generated_keyframe_positions = {40, 121};
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Distilled, r, c), "positions must lie in [0, 121)");
  r.generated_keyframe_positions = {};
  r.temporal_upsample_rounds = 1;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Distilled, r, c), "DFR option");
  r.temporal_upsample_rounds = 0;
  r.detailing_lora_strength = 1.0;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Distilled, r, c), "DFR option");

  EXPECT_EQ(pipelines::resolve_generated_keyframes(0, {96, 24, 24}, 121), (std::vector<int64_t>{24, 96}));
  EXPECT_EQ(pipelines::resolve_generated_keyframes(3, {}, 121), (std::vector<int64_t>{30, 60, 90}));
  EXPECT_TRUE(pipelines::resolve_generated_keyframes(0, {}, 121).empty());
}

}  // namespace
}  // namespace ltx
