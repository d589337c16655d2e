// The HDR IC-LoRA's building blocks: its LoRA metadata, the resolution rule, the frame count of
// high-quality mode and the reference-video preparation (reflect-pad fit, display range -> [-1, 1],
// the high-quality frame doubling).
#include "pipelines/hdr_ic_lora.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "media/preprocess.h"
#include "models/tiling.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "support/test_support.h"

namespace ltx::hdr_ic_lora_test {
namespace {

namespace hdr = pipelines::hdr_ic_lora;

std::string lora_with(const test::TempDir& dir, const std::string& name,
                      const std::map<std::string, std::string>& meta) {
  const std::string path = dir.file(name);
  io::write_safetensors(
      path,
      {{"diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight", Tensor::zeros({2, 32})}},
      meta);
  return path;
}

TEST(HdrIcLoraMetadata, TransferAndScaleComeFromTheFile) {
  test::TempDir dir;
  auto cfg =
      hdr::read_hdr_lora_config(lora_with(dir, "a.safetensors", {{"hdr_transform", "logc3"}}));
  EXPECT_EQ(cfg.transfer, media::HdrTransfer::LogC3);
  EXPECT_EQ(cfg.reference_downscale_factor, 1);
  cfg = hdr::read_hdr_lora_config(lora_with(
      dir, "b.safetensors", {{"hdr_transform", "acescct"}, {"reference_downscale_factor", "2"}}));
  EXPECT_EQ(cfg.transfer, media::HdrTransfer::ACEScct);
  EXPECT_EQ(cfg.reference_downscale_factor, 2);
  // A bare flag means the default working space, LogC3 (as the reference).
  cfg = hdr::read_hdr_lora_config(lora_with(dir, "c.safetensors", {{"hdr_transform", "true"}}));
  EXPECT_EQ(cfg.transfer, media::HdrTransfer::LogC3);
  cfg = hdr::read_hdr_lora_config(lora_with(dir, "d.safetensors", {{"use_hdr_transform", "1"}}));
  EXPECT_EQ(cfg.transfer, media::HdrTransfer::LogC3);
}

TEST(HdrIcLoraMetadata, LorasWithoutHdrMetadataOrWithBadValuesAreRefused) {
  test::TempDir dir;
  const std::string plain =
      lora_with(dir, "plain.safetensors", {{"reference_downscale_factor", "2"}});
  test::expect_error_containing(
      [&] { hdr::read_hdr_lora_config(plain); },
      {"--hdr-lora", "plain.safetensors", "no HDR metadata", "--pipeline ic-lora"});
  const std::string pq = lora_with(dir, "pq.safetensors", {{"hdr_transform", "pq"}});
  test::expect_error_containing([&] { hdr::read_hdr_lora_config(pq); },
                                {"pq.safetensors", "hdr_transform", "unknown HDR transfer 'pq'"});
  const std::string bad = lora_with(
      dir, "bad.safetensors", {{"hdr_transform", "logc3"}, {"reference_downscale_factor", "0"}});
  test::expect_error_containing(
      [&] { hdr::read_hdr_lora_config(bad); },
      {"bad.safetensors", "reference_downscale_factor", "positive integer"});
}

TEST(HdrIcLoraSize, AlignsUpTo64AndCropsBack) {
  const hdr::HdrResolution r = hdr::align_resolution(72, 176);
  EXPECT_EQ(r.gen_height, 128);
  EXPECT_EQ(r.gen_width, 192);
  EXPECT_EQ(r.crop_height, 72);
  EXPECT_EQ(r.crop_width, 176);
  const hdr::HdrResolution same = hdr::align_resolution(128, 64);
  EXPECT_EQ(same.gen_height, 128);
  EXPECT_EQ(same.gen_width, 64);
  EXPECT_EQ(hdr::generated_frames(9, false), 9);
  EXPECT_EQ(hdr::generated_frames(9, true), 17);
}

Tensor clip(int64_t f, int64_t h, int64_t w) {
  Tensor t = Tensor::empty({f, h, w, 3}, DType::U8);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<uint8_t>()[i] = static_cast<uint8_t>((i * 37 + i / 7) % 256);
  return t;
}

TEST(HdrIcLoraVideo, FitsMapsAndCapsTheFrames) {
  const Tensor frames = clip(12, 72, 176);
  // Stage 1 of a 128x192 generation, downscale 1: 64x96.
  const Tensor v = hdr::reference_video(frames, 64, 96, 9, 1, false);
  ASSERT_EQ(v.shape(), (Shape{1, 3, 9, 64, 96}));
  const Tensor fitted = media::resize_and_reflect_pad(frames.narrow(0, 0, 9), 64, 96);
  const float* got = v.data<float>();
  const float* fit = fitted.data<float>();
  for (int64_t i = 0; i < v.numel(); ++i)
    ASSERT_EQ(got[i], std::clamp(fit[i] / 255.0f, 0.0f, 1.0f) * 2.0f - 1.0f) << i;
  // Downscale 2 halves the reference size; bf16 on request.
  const Tensor half = hdr::reference_video(frames, 64, 96, 9, 2, false, DType::BF16);
  EXPECT_EQ(half.shape(), (Shape{1, 3, 9, 32, 48}));
  EXPECT_EQ(half.dtype(), DType::BF16);
  // Fewer frames than asked: all of them, as the reference's decoder stops at the clip's end.
  EXPECT_EQ(hdr::reference_video(frames, 64, 96, 17, 1, false).size(2), 12);
  test::expect_error_containing([&] { hdr::reference_video(frames, 64, 96, 9, 3, false); },
                                {"64x96", "divisible", "reference_downscale_factor 3"});
}

TEST(HdrIcLoraVideo, HighQualityLoadsHalfTheFramesAndDoublesEach) {
  const Tensor frames = clip(12, 72, 176);
  // 9 output frames -> 17 generated: the first 9 clip frames, each twice, cut to 17.
  const Tensor hq = hdr::reference_video(frames, 64, 96, 17, 1, true);
  ASSERT_EQ(hq.shape(), (Shape{1, 3, 17, 64, 96}));
  const Tensor plain = hdr::reference_video(frames, 64, 96, 9, 1, false);
  for (int64_t f = 0; f < 17; ++f)
    EXPECT_EQ(test::max_abs_diff(hq.narrow(2, f, 1), plain.narrow(2, f / 2, 1)), 0) << f;
}

namespace tl = models::tiling;

std::vector<std::array<int64_t, 6>> in_ranges(const std::vector<tl::Tile>& tiles) {
  std::vector<std::array<int64_t, 6>> out;
  for (const auto& t : tiles)
    out.push_back(
        {t.in[0].start, t.in[0].stop, t.in[1].start, t.in[1].stop, t.in[2].start, t.in[2].stop});
  return out;
}

TEST(HdrIcLoraStage2, TileLayoutFollowsTheClampedCounts) {
  // The e2e request: 128x192 generated, 9 frames -> latent 2 x 4 x 6. Frames (2, 8) -> (2, 0),
  // rows (2, 6) -> (2, 2): tiles of 3; columns (2, 6) -> (2, 4): tiles of 5.
  const auto tiles = hdr::stage2_tiles(2, 4, 6, hdr::default_stage2_tiling());
  const std::vector<std::array<int64_t, 6>> want = {
      {0, 1, 0, 3, 0, 5}, {0, 1, 0, 3, 1, 6}, {0, 1, 1, 4, 0, 5}, {0, 1, 1, 4, 1, 6},
      {1, 2, 0, 3, 0, 5}, {1, 2, 0, 3, 1, 6}, {1, 2, 1, 4, 0, 5}, {1, 2, 1, 4, 1, 6}};
  EXPECT_EQ(in_ranges(tiles), want);
  // Trapezoids: 2-cell ramps on rows (1, 2/3, 1/3 | 1/3, 2/3, 1), 4-cell ramps on columns.
  EXPECT_EQ(tiles[0].masks[0], std::vector<float>({1.0f}));
  ASSERT_EQ(tiles[0].masks[1].size(), 3u);
  EXPECT_FLOAT_EQ(tiles[0].masks[1][1], 2.0f / 3);
  EXPECT_FLOAT_EQ(tiles[0].masks[1][2], 1.0f / 3);
  EXPECT_FLOAT_EQ(tiles[2].masks[1][0], 1.0f / 3);
  EXPECT_FLOAT_EQ(tiles[1].masks[2][0], 0.2f);
  EXPECT_TRUE(tl::masks_are_complementary(tiles, Shape{2, 4, 6}));
  // High quality (17 frames -> 3 latent frames): frames (2, 8) -> (2, 1), tiles [0, 2) and [1, 3).
  const auto hq = hdr::stage2_tiles(3, 4, 6, hdr::default_stage2_tiling());
  ASSERT_EQ(hq.size(), 8u);
  EXPECT_EQ(hq[0].in[0], (tl::Range{0, 2}));
  EXPECT_EQ(hq[4].in[0], (tl::Range{1, 3}));
  EXPECT_EQ(hq[0].masks[0], std::vector<float>({1.0f, 0.5f}));
  // An axis shorter than its tile count is not tiled.
  EXPECT_EQ(hdr::clamp_tile_count(tl::DimensionTilingConfig(2, 8), 1).num_tiles, 1);
  EXPECT_EQ(hdr::stage2_tiles(1, 4, 6, hdr::default_stage2_tiling()).size(), 4u);
  const hdr::TilePixelSize px = hdr::tile_pixel_size(hq[0]);
  EXPECT_EQ(px.frames, 9);
  EXPECT_EQ(px.height, 96);
  EXPECT_EQ(px.width, 160);
}

TEST(HdrIcLoraStage2, BlendedTilesRebuildTheLatentAndReferencesAreSliced) {
  const int64_t F = 3, H = 4, W = 6, C = 2;
  const auto tiles = hdr::stage2_tiles(F, H, W, hdr::default_stage2_tiling());
  const Tensor full = test::random_tensor({1, C, F, H, W}, 5);
  const Tensor out = Tensor::zeros({1, C, F, H, W});
  for (const auto& t : tiles)
    hdr::blend_tile(out, tl::slice_ranges(full, {{0, 1}, {0, C}, t.in[0], t.in[1], t.in[2]}), t);
  // The masks sum to one on every axis: blending the cut-outs of one latent gives it back.
  EXPECT_LT(test::max_abs_diff(out, full), 1e-6);
  // One tile alone: its masks' product at a cell in the overlap.
  const Tensor one = Tensor::zeros({1, C, F, H, W});
  const tl::Tile& t = tiles[7];  // frames [1, 3), rows [1, 4), columns [1, 6)
  hdr::blend_tile(one, Tensor::full({1, C, 2, 3, 5}, 1.0), t);
  const float* o = one.data<float>();
  const auto at = [&](int64_t f, int64_t h, int64_t w) { return o[(f * H + h) * W + w]; };
  EXPECT_FLOAT_EQ(at(1, 1, 1), (t.masks[0][0] * t.masks[1][0]) * t.masks[2][0]);
  EXPECT_FLOAT_EQ(at(2, 3, 5), 1.0f);
  EXPECT_EQ(at(0, 0, 0), 0.0f);
  // The reference for a tile: its frames, rows and columns / the downscale factor.
  const Tensor ref = test::random_tensor({1, C, F, 2, 3}, 6);
  const Tensor part = hdr::tile_reference_latent(ref, t, 2);
  EXPECT_EQ(part.shape(), (Shape{1, C, 2, 2, 3}));  // rows 1 // 2 .. 4 // 2, columns 0 .. 3
  EXPECT_EQ(test::max_abs_diff(part, ref.slice(2, 1, 3)), 0);
}

struct TinyModels {
  models::transformer::LTXModel transformer = models::transformer::LTXModel::from_files(
      {test::fixture("e2e/ltx23_tiny.safetensors")}, models::transformer::LTXModelType::AudioVideo);
  models::video_vae::VideoEncoder encoder =
      models::video_vae::VideoEncoder::from_file(test::fixture("e2e/ltx23_tiny.safetensors"));
  models::upsampler::LatentUpsampler upsampler = models::upsampler::LatentUpsampler::from_file(
      test::fixture("e2e/ltx23_tiny_upsampler_x2.safetensors"));
  pipelines::TextContexts contexts;
  TinyModels() {
    auto text = io::SafetensorsFile::open(test::fixture("e2e_text.io.safetensors"));
    contexts.video_positive = text->tensor("out.text.positive.video_encoding").contiguous();
  }
};

const TinyModels& tiny() {
  static const TinyModels m;
  return m;
}

pipelines::GenerationRequest hdr_request() {
  pipelines::GenerationRequest r;
  r.seed = 5;
  r.height = 72;  // the clip's size: generated at 128 x 192, cropped back
  r.width = 176;
  r.num_frames = 9;
  r.dtype = DType::F32;
  r.audio = false;
  r.video_conditionings.push_back({clip(12, 72, 176), 1.0, "clip.mp4"});
  return r;
}

TEST(HdrIcLoraPipeline, RunsStage1ThenEveryStage2Tile) {
  const TinyModels& m = tiny();
  std::vector<pipelines::Stage> stages;
  pipelines::Components c;
  c.transformer = &m.transformer;
  c.video_encoder = &m.encoder;
  c.spatial_upsampler = &m.upsampler;
  c.model_version = "2.3.0";
  c.stage_transformer = [&](pipelines::Stage s) -> const models::transformer::LTXModel& {
    stages.push_back(s);
    return m.transformer;
  };
  const hdr::HdrIcLoraOptions opt;
  const auto out = hdr::run_hdr_ic_lora(hdr_request(), c, m.contexts, opt);
  EXPECT_EQ(out.video_latent.shape(), (Shape{1, 16, 2, 4, 6}));
  EXPECT_EQ(out.size.gen_height, 128);
  EXPECT_EQ(out.size.gen_width, 192);
  ASSERT_EQ(stages.size(), 2u);  // each stage's model is asked for once
  EXPECT_EQ(stages[0], pipelines::Stage::One);
  EXPECT_EQ(stages[1], pipelines::Stage::Two);
  const auto again = hdr::run_hdr_ic_lora(hdr_request(), c, m.contexts, opt);
  EXPECT_EQ(test::max_abs_diff(out.video_latent, again.video_latent), 0.0);
  // Another reference clip, another result.
  auto other = hdr_request();
  Tensor darker = clip(12, 72, 176);
  for (int64_t i = 0; i < darker.numel(); i += 3) darker.data<uint8_t>()[i] = 0;
  other.video_conditionings[0].frames = darker;
  EXPECT_GT(test::max_abs_diff(out.video_latent,
                               hdr::run_hdr_ic_lora(other, c, m.contexts, opt).video_latent),
            1e-4);
  // High quality: 17 frames generated (3 latent frames), cut back by linear_frames.
  hdr::HdrIcLoraOptions hq;
  hq.high_quality = true;
  const auto hqo = hdr::run_hdr_ic_lora(hdr_request(), c, m.contexts, hq);
  EXPECT_EQ(hqo.video_latent.shape(), (Shape{1, 16, 3, 4, 6}));
  EXPECT_EQ(hqo.generated_frames, 17);
  auto none = hdr_request();
  none.video_conditionings.clear();
  test::expect_error_containing([&] { hdr::run_hdr_ic_lora(none, c, m.contexts, opt); },
                                {"no reference video", "--video-conditioning"});
}

TEST(HdrIcLoraPipeline, LinearFramesCropSubsampleAndDecompress) {
  // 18% grey's LogC3 code everywhere, 17 decoded frames at 128 x 192.
  const Tensor decoded = Tensor::full({17, 128, 192, 3}, 0.391007);
  const hdr::HdrResolution size = hdr::align_resolution(72, 176);
  const Tensor lin = hdr::linear_frames(decoded, size, true, media::HdrTransfer::LogC3);
  ASSERT_EQ(lin.shape(), (Shape{9, 72, 176, 3}));
  EXPECT_NEAR(lin.data<float>()[0], 0.18, 1e-5);
  EXPECT_EQ(hdr::linear_frames(decoded, size, false, media::HdrTransfer::LogC3).size(0), 17);
}

}  // namespace
}  // namespace ltx::hdr_ic_lora_test
