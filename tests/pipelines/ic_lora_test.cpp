// The IC-LoRA pipeline's parts on synthetic inputs: the LoRA metadata reader (downscale / temporal
// factors, conflicts, bad values), the attention-mask downsampling and temporal subsampling against
// hand-computed values, the request checks, and the pipeline on the tiny LTX-2.3 set (stage order,
// sizes with and without stage 2, what the reference and its attention strength change).
#include <cmath>
#include <map>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/dfr.h"
#include "pipelines/ic_lora.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx::ic_lora_test {
namespace {

namespace mt = models::transformer;
namespace icl = pipelines::ic_lora;
using pipelines::PipelineKind;
using pipelines::Stage;

std::string lora_with(const test::TempDir& dir, const std::string& name, const std::map<std::string, std::string>& meta) {
  const std::string path = dir.file(name);
  io::write_safetensors(path, {{"diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight", Tensor::zeros({2, 32})}},
                        meta);
  return path;
}

TEST(IcLoraMetadata, FactorsComeFromTheFileOrDefaultToOne) {
  test::TempDir dir;
  const std::string plain = lora_with(dir, "plain.safetensors", {});
  const std::string union2 = lora_with(dir, "union.safetensors", {{"reference_downscale_factor", "2"}});
  const std::string slow = lora_with(dir, "slow.safetensors", {{"reference_temporal_scale_factor", "4"}});
  EXPECT_EQ(icl::read_reference_scale_factors(plain).downscale, 1);
  EXPECT_EQ(icl::read_reference_scale_factors(plain).temporal, 1);
  EXPECT_EQ(icl::read_reference_scale_factors(union2).downscale, 2);
  EXPECT_EQ(icl::read_reference_scale_factors(slow).temporal, 4);
  // A factor != 1 wins over the 1 of a plain LoRA; both kinds combine.
  const auto f = icl::combine_reference_scale_factors({plain, union2, slow});
  EXPECT_EQ(f.downscale, 2);
  EXPECT_EQ(f.temporal, 4);
  // DFR's detailing LoRA reads the same key with its own default (x2 detailing).
  EXPECT_EQ(pipelines::dfr::read_detailing_downscale_factor(plain), 2);
  EXPECT_EQ(pipelines::dfr::read_detailing_downscale_factor(union2), 2);
}

TEST(IcLoraMetadata, BadOrConflictingFactorsAreRefusedNamingTheFile) {
  test::TempDir dir;
  const std::string bad = lora_with(dir, "bad.safetensors", {{"reference_downscale_factor", "two"}});
  const std::string zero = lora_with(dir, "zero.safetensors", {{"reference_temporal_scale_factor", "0"}});
  const std::string x2 = lora_with(dir, "x2.safetensors", {{"reference_downscale_factor", "2"}});
  const std::string x4 = lora_with(dir, "x4.safetensors", {{"reference_downscale_factor", "4"}});
  EXPECT_ERROR_HAS(icl::read_reference_scale_factors(bad), "reference_downscale_factor 'two' is not a positive integer");
  EXPECT_ERROR_HAS(icl::read_reference_scale_factors(zero), zero);
  EXPECT_ERROR_HAS(icl::combine_reference_scale_factors({x2, x4}, "--lora"),
                   "--lora: the IC-LoRAs disagree on reference_downscale_factor");
  EXPECT_ERROR_HAS(icl::read_reference_scale_factors(dir.file("missing.safetensors")), "missing.safetensors");
}

TEST(IcLoraMask, DownsamplesAreaInSpaceAndGroupsFramesAfterTheFirst) {
  // [1, 1, 5, 4, 4]: value = 100 * frame + 10 * row + col; latent 2 frames x 2 x 2.
  std::vector<float> v;
  for (int f = 0; f < 5; ++f)
    for (int y = 0; y < 4; ++y)
      for (int x = 0; x < 4; ++x) v.push_back(static_cast<float>(100 * f + 10 * y + x));
  const Tensor mask = Tensor::from_vector(v, {1, 1, 5, 4, 4});
  const Tensor w = icl::downsample_mask_to_latent(mask, 2, 2, 2);
  ASSERT_EQ(w.shape(), (Shape{1, 8}));
  // 2x2 area means: 10 * (2 * row block + 0.5) + (2 * col block + 0.5) on top of the frame term.
  const std::vector<float> cells = {5.5f, 7.5f, 25.5f, 27.5f};
  std::vector<float> expect;
  for (float c : cells) expect.push_back(c);                 // frame 0 alone
  for (float c : cells) expect.push_back(250.0f + c);        // mean of frames 1-4: 100 * 2.5
  const std::vector<float> got = w.to_float_vector();
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR(got[i], expect[i], 1e-4) << i;
  // One latent frame: the first mask frame only.
  EXPECT_EQ(icl::downsample_mask_to_latent(mask, 1, 2, 2).shape(), (Shape{1, 4}));
  EXPECT_ERROR_HAS(icl::downsample_mask_to_latent(mask, 4, 2, 2), "5 mask frames do not fit 4 latent frames");
}

TEST(IcLoraVideo, TemporalSubsampleKeepsFrameZeroThenEveryNth) {
  std::vector<float> v(10);
  for (int i = 0; i < 10; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  const Tensor video = Tensor::from_vector(v, {1, 1, 10, 1, 1});
  EXPECT_EQ(icl::temporal_subsample(video, 4).to_float_vector(), (std::vector<float>{0, 1, 5, 9}));
  EXPECT_EQ(icl::temporal_subsample(video, 1).to_float_vector(), v);
}

TEST(IcLoraVideo, PreprocessCapsTheFramesAndMapsToUnitRange) {
  const Tensor frames = Tensor::full({12, 48, 30, 3}, 255.0, DType::U8);
  const Tensor px = icl::preprocess_reference_video(frames, 64, 32, 9, DType::F32);
  EXPECT_EQ(px.shape(), (Shape{1, 3, 9, 64, 32}));
  EXPECT_NEAR(test::max_abs_diff(px, Tensor::full(px.shape(), 1.0)), 0.0, 1e-6);
  // The mask clip: mid gray 128 -> (128 / 127.5 - 1 + 1) / 2 in bf16 steps, about 0.502.
  const Tensor mask = icl::mask_from_frames(Tensor::full({3, 8, 8, 3}, 128.0, DType::U8), 4, 4, 9);
  EXPECT_EQ(mask.shape(), (Shape{1, 1, 3, 4, 4}));
  EXPECT_EQ(mask.dtype(), DType::BF16);
  EXPECT_NEAR(mask.to_float_vector()[0], 0.502, 0.002);
  // A bf16 mask's weights are bf16 values (each step rounds as the reference's bf16 ops).
  const Tensor w = icl::downsample_mask_to_latent(test::random_tensor({1, 1, 9, 8, 8}, 3, 0.f, 1.f).to(DType::BF16), 2, 2, 2);
  EXPECT_EQ(w.dtype(), DType::F32);
  EXPECT_EQ(test::max_abs_diff(w, w.to(DType::BF16).to(DType::F32)), 0.0);
  EXPECT_ERROR_HAS(icl::preprocess_reference_video(Tensor::zeros({2, 4, 4}, DType::U8), 4, 4, 9, DType::F32),
                   "u8 [F, H, W, 3]");
}

struct TinySet {
  mt::LTXModel transformer =
      mt::LTXModel::from_files({test::fixture("e2e/ltx23_tiny.safetensors")}, mt::LTXModelType::AudioVideo);
  models::video_vae::VideoEncoder encoder =
      models::video_vae::VideoEncoder::from_file(test::fixture("e2e/ltx23_tiny.safetensors"));
  models::upsampler::LatentUpsampler upsampler =
      models::upsampler::LatentUpsampler::from_file(test::fixture("e2e/ltx23_tiny_upsampler_x2.safetensors"));
  pipelines::TextContexts contexts;
  TinySet() {
    auto text = io::SafetensorsFile::open(test::fixture("e2e_text.io.safetensors"));
    contexts.video_positive = text->tensor("out.text.positive.video_encoding").contiguous();
    contexts.audio_positive = text->tensor("out.text.positive.audio_encoding").contiguous();
  }
  pipelines::Components components() const {
    pipelines::Components c;
    c.transformer = &transformer;
    c.video_encoder = &encoder;
    c.spatial_upsampler = &upsampler;
    c.model_version = "2.3.0";
    return c;
  }
};

const TinySet& tiny() {
  static const TinySet s;
  return s;
}

Tensor clip(int64_t frames, uint64_t seed) {
  const Tensor f = test::random_tensor({frames, 40, 36, 3}, seed, 0.0f, 255.0f);
  return f.to(DType::U8);
}

pipelines::GenerationRequest ic_request() {
  auto r = pipelines::default_request(PipelineKind::IcLora, "2.3.0");
  r.seed = 5;
  r.height = 128;
  r.width = 128;
  r.num_frames = 9;
  r.dtype = DType::F32;
  r.video_conditionings.push_back({clip(12, 1), 1.0, "clip"});
  return r;
}

TEST(IcLoraPipeline, RunsStage1WithTheLoraThenTheBaseRefinement) {
  const TinySet& m = tiny();
  std::vector<Stage> stages;
  pipelines::Components c = m.components();
  c.stage_transformer = [&](Stage s) -> const mt::LTXModel& {
    stages.push_back(s);
    return m.transformer;
  };
  const auto out = pipelines::run_pipeline(PipelineKind::IcLora, ic_request(), c, m.contexts);
  EXPECT_EQ(stages, (std::vector<Stage>{Stage::One, Stage::Two}));
  EXPECT_EQ(out.video_latent.shape(), (Shape{1, 16, 2, 4, 4}));
  EXPECT_EQ(out.height, 128);
  EXPECT_TRUE(out.audio_latent.defined());
  auto r = ic_request();
  r.skip_stage_2 = true;
  stages.clear();
  const auto half = pipelines::run_pipeline(PipelineKind::IcLora, r, c, m.contexts);
  EXPECT_EQ(stages, (std::vector<Stage>{Stage::One}));
  EXPECT_EQ(half.video_latent.shape(), (Shape{1, 16, 2, 2, 2}));
  EXPECT_EQ(half.height, 64);
  EXPECT_EQ(half.width, 64);
}

TEST(IcLoraPipeline, TheReferenceAndItsAttentionStrengthShapeTheResult) {
  const TinySet& m = tiny();
  auto r = ic_request();
  r.skip_stage_2 = true;
  const auto a = pipelines::run_pipeline(PipelineKind::IcLora, r, m.components(), m.contexts);
  const auto again = pipelines::run_pipeline(PipelineKind::IcLora, r, m.components(), m.contexts);
  EXPECT_EQ(test::max_abs_diff(a.video_latent, again.video_latent), 0.0);
  auto other = r;
  other.video_conditionings[0].frames = clip(12, 2);
  EXPECT_GT(test::max_abs_diff(a.video_latent,
                               pipelines::run_pipeline(PipelineKind::IcLora, other, m.components(), m.contexts).video_latent),
            1e-4);
  auto weaker = r;
  weaker.conditioning_attention_strength = 0.3;
  EXPECT_GT(test::max_abs_diff(a.video_latent,
                               pipelines::run_pipeline(PipelineKind::IcLora, weaker, m.components(), m.contexts).video_latent),
            1e-5);
  // A full-strength mask of ones is the same as no mask.
  auto ones = r;
  ones.conditioning_attention_mask = Tensor::full({1, 1, 9, 64, 64}, 1.0);
  EXPECT_LE(test::max_abs_diff(a.video_latent,
                               pipelines::run_pipeline(PipelineKind::IcLora, ones, m.components(), m.contexts).video_latent),
            1e-5);
  // The downscale factor moves the reference's positions (and halves its size): another result.
  auto scaled = r;
  scaled.height = 256;
  scaled.width = 256;
  auto base = scaled;
  scaled.reference_downscale_factor = 2;
  EXPECT_GT(test::max_abs_diff(
                pipelines::run_pipeline(PipelineKind::IcLora, base, m.components(), m.contexts).video_latent,
                pipelines::run_pipeline(PipelineKind::IcLora, scaled, m.components(), m.contexts).video_latent),
            1e-5);
}

TEST(IcLoraPipeline, BadRequestsAreRefusedBeforeAnyWork) {
  const TinySet& m = tiny();
  auto none = ic_request();
  none.video_conditionings.clear();
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::IcLora, none, m.components()), "--video-conditioning");
  auto strong = ic_request();
  strong.video_conditionings[0].strength = 1.5;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::IcLora, strong, m.components()), "must be in [0, 1]");
  auto attn = ic_request();
  attn.conditioning_attention_strength = -0.1;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::IcLora, attn, m.components()), "--conditioning-attention-mask");
  auto factor = ic_request();
  factor.reference_downscale_factor = 3;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::IcLora, factor, m.components()),
                   "reference_downscale_factor 3");
  // 128x128 -> stage 1 64x64 -> reference 32x32 at factor 2: one latent cell, fine; factor 4
  // gives 16x16, which the x32 VAE cannot encode.
  auto grid = ic_request();
  grid.reference_downscale_factor = 4;
  EXPECT_ERROR_HAS(pipelines::run_pipeline(PipelineKind::IcLora, grid, m.components(), m.contexts), "x32 grid");
  auto other = pipelines::default_request(PipelineKind::Distilled, "2.3.0");
  other.height = other.width = 128;
  other.num_frames = 9;
  other.skip_stage_2 = true;
  EXPECT_ERROR_HAS(pipelines::validate_request(PipelineKind::Distilled, other, m.components()), "--pipeline ic-lora");
  EXPECT_EQ(pipelines::parse_pipeline_kind("ic_lora"), PipelineKind::IcLora);
  EXPECT_STREQ(pipelines::pipeline_name(PipelineKind::IcLora), "ic-lora");
  EXPECT_FALSE(pipelines::uses_guidance(PipelineKind::IcLora));
  EXPECT_FALSE(pipelines::supports_batching(PipelineKind::IcLora));
}

}  // namespace
}  // namespace ltx::ic_lora_test
