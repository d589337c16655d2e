// The diffusion decoder's automatic decode tiling (reference: recommended_decode_tiling_config and
// diffvae_tiling_geometry_from_vae_config, which the pipelines' AUTO_TILING calls through
// tiling_config_for_vae): geometry of a config, the stage-4 feature bytes, the weight bytes of a
// file and the recommended layouts. The expected layouts were worked out from the reference's
// formulas (the tiny cases by hand below, the real-size ones with its function on the same inputs).
#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "models/vae_test_util.h"
#include "models/video_vae/diffusion_tiling.h"
#include "support/test_support.h"

namespace ltx::diffusion_tiling_test {
namespace {

using namespace models;
using namespace models::video_vae;

constexpr int64_t kGiB = int64_t{1} << 30;

// The tiny fixture's decoder: stage kernels (3,1,3) (3,3,5) (3,3,3) (3,5,5), stage-5 kernel 7^3,
// depths 1 1 1 2 2, channels 128 64 32 32 16, patch 4, the 2.5 upsamples.
DiffusionDecoderConfig tiny_config() {
  const auto f = test::open_fixture("diffdec_ltx25.weights.safetensors");
  return diffusion_decoder_config_from_metadata(f->metadata_json(), "diffdec_ltx25");
}

// The real 2.5 file's shape of the decoder (docs/DIFFUSION_DECODER.md).
DiffusionDecoderConfig real_config() {
  DiffusionDecoderConfig c;
  c.stage_channels = {2048, 1024, 512, 512, 256};
  c.stage_kernels = {{3, 7, 7}, {3, 7, 7}, {3, 5, 5}, {3, 5, 5}, {11, 11, 11}};
  c.stage5_kernel = {11, 11, 11};
  return c;
}

struct Layout {
  int64_t frames, height, width;
};
Layout layout_of(const tiling::TileSizeConfig& c) {
  return {c.frames.tile_size, c.height.tile_size, c.width.tile_size};
}
#define EXPECT_LAYOUT(cfg, t, h, w)                \
  do {                                             \
    const Layout l_ = layout_of(cfg);              \
    EXPECT_EQ(l_.frames, t);                       \
    EXPECT_EQ(l_.height, h);                       \
    EXPECT_EQ(l_.width, w);                        \
  } while (0)

TEST(DiffusionTiling, GeometryOfTheTinyConfig) {
  const DiffusionTilingGeometry g = diffusion_tiling_geometry(tiny_config());
  // Halos: stage 4 depth 2 x (3,5,5)/2 = (2,4,4); stage 5 ceil(2 x 7/2 / 2) = 3 per axis.
  EXPECT_EQ(g.tile_halos.first, (Axis3{2, 4, 4}));
  EXPECT_EQ(g.tile_halos.second, (Axis3{3, 3, 3}));
  EXPECT_EQ(g.pixel_scale, (tiling::ScaleFactors{2, 8, 8}));  // stride (2,2,2) x patch 4
  EXPECT_EQ(g.min_tile_size_s4, (Axis3{4, 5, 5}));            // max(K4, ceil(7 / 2))
  EXPECT_EQ(g.patch_size, 4);
  EXPECT_EQ(g.stage5_channels, 16);
  EXPECT_EQ(g.stage4_channels, 32);
  EXPECT_EQ(g.trailing_pad_latent_frames, 2);  // (3 / 2) * 2
  EXPECT_EQ(g.out_channels, 3);
  ASSERT_EQ(g.upsample_strides.size(), 4u);
  EXPECT_EQ(g.upsample_strides[1], (Axis3{2, 1, 1}));

  const DiffusionTilingGeometry real = diffusion_tiling_geometry(real_config());
  EXPECT_EQ(real.tile_halos.second, (Axis3{20, 20, 20}));  // ceil(8 x 5 / 2)
  EXPECT_EQ(real.min_tile_size_s4, (Axis3{6, 6, 6}));      // ceil(11 / 2)
  EXPECT_EQ(real.stage5_channels, 256);
  EXPECT_EQ(real.stage4_channels, 512);
}

TEST(DiffusionTiling, Stage4FeatureBytesCountTheGhostFrames) {
  const DiffusionTilingGeometry g = diffusion_tiling_geometry(tiny_config());
  // 17 x 64 x 96 px: latent (16 / 8 + 1 = 3, 2, 3) + 2 ghost frames = 5 frames; upsamples 0-2:
  // T 5 -> 5 -> 9 -> 17, H 2 -> 4 -> 4 -> 8, W 3 -> 6 -> 6 -> 12; 17 x 8 x 12 x 32 ch x 2 B.
  EXPECT_EQ(stage4_feature_bytes(g, 64, 96, 17, 2), 17 * 8 * 12 * 32 * 2);
  // 121 x 1024 x 1536 on the real shape: latent (16, 32, 48) + 2 -> T 18 -> 35 -> 69,
  // H 32 -> 128, W 48 -> 192; x 512 ch x 2 B.
  EXPECT_EQ(stage4_feature_bytes(diffusion_tiling_geometry(real_config()), 1024, 1536, 121, 2),
            int64_t{69} * 128 * 192 * 512 * 2);
}

TEST(DiffusionTiling, WeightBytesCountTheDecoderTensorsAsBf16) {
  const auto f = test::open_fixture("diffdec_ltx25.weights.safetensors");
  int64_t numel = 0;
  for (const io::TensorInfo& info : f->infos()) numel += info.numel();  // all decoder tensors
  EXPECT_EQ(numel, 454592);
  EXPECT_EQ(diffusion_decoder_weight_bytes(*f), 2 * numel);
}

TEST(DiffusionTiling, TinyRecommendationsFollowTheBudget) {
  const DiffusionTilingGeometry g = diffusion_tiling_geometry(tiny_config());
  // 17 x 64 x 96 px. Overlaps: roundup(max(2, 3) x 2, 8) = 8 frames, roundup(max(4, 3) x 8, 32)
  // = 32 px. Floors: frames roundup(max(4, 16, 4 x 2, 16), 8) = 16; height / width
  // roundup(max(16, 64, 5 x 8, 64), 32) = 64. Candidates: frames 16 (2 tiles: (17 + 16 - 16 - 1)
  // / 8) and 24 (1); height 64 (1); width 64 (2) and 96 (1).
  // Budget: usable = free - max(model 0, 1 GiB) - 1 GiB - stage-4 feature 104448 B. Accumulator
  // 2 tile_t x 64 x 96 x 3 x 2 B = 73728 tile_t; stage 5 costs 16 ch x 2 B x 5 = 160 B per token
  // (tile_t x tile_h / 4 x tile_w / 4).
  DiffusionTilingBudget b;
  const int64_t base = 2 * kGiB + 17 * 8 * 12 * 32 * 2;
  // usable 3e6: (24, 64, 96) needs 9216 tokens > (3e6 - 1769472) / 160 = 7690 -> out;
  // (16, 64, 96) and (24, 64, 64) both process 196608 px (waste 1.88) at the same volume and tile
  // count, the smaller tile_t wins the tie -> (16, 64, 96).
  b.free_bytes = base + 3000000;
  tiling::TileSizeConfig c = recommended_decode_tiling(g, 64, 96, 17, b);
  EXPECT_LAYOUT(c, 16, 64, 96);
  EXPECT_EQ(c.frames.overlap, 8);
  EXPECT_EQ(c.height.overlap, 32);
  EXPECT_EQ(c.width.overlap, 32);
  // usable 2e6: (16, 64, 96) needs 6144 tokens > (2e6 - 1179648) / 160 = 5127; (16, 64, 64)
  // needs 4096 -> 4 tiles.
  b.free_bytes = base + 2000000;
  EXPECT_LAYOUT(recommended_decode_tiling(g, 64, 96, 17, b), 16, 64, 64);
  // Plenty of memory: one tile per axis, (24, 64, 96), waste 147456 / 104448.
  b.free_bytes = 64 * kGiB;
  EXPECT_LAYOUT(recommended_decode_tiling(g, 64, 96, 17, b), 24, 64, 96);
  // The weights count as at least 1 GiB, and beyond that in full: 3e6 B more of weights leave
  // nothing of the 3e6 usable.
  b.model_bytes = kGiB + 3000000;
  b.free_bytes = base + 3000000;
  EXPECT_ERROR_HAS(recommended_decode_tiling(g, 64, 96, 17, b), "no decode tile fits");
  // usable 1179649: the smallest accumulator (1179648 B) fits but leaves room for 0 tokens.
  b.model_bytes = 0;
  b.free_bytes = base + 1179649;
  EXPECT_ERROR_HAS(recommended_decode_tiling(g, 64, 96, 17, b),
                   "no decode tile fits the memory budget (smallest tile 16 frames x 64x64 px, "
                   "overlaps 8 frames / 32 px");
  // free 0 (the reference's value off CUDA): nothing fits, as there.
  b.free_bytes = 0;
  EXPECT_ERROR_HAS(recommended_decode_tiling(g, 64, 96, 17, b), "0 bytes free");
  EXPECT_ERROR_HAS(recommended_decode_tiling(g, 64, 0, 17, b), "at least 1 x 1 x 1");
}

TEST(DiffusionTiling, RealSizeRecommendationsMatchTheReference) {
  const DiffusionTilingGeometry g = diffusion_tiling_geometry(real_config());
  // Overlaps: stage-5 halo 20 -> roundup(20 x 2, 8) = 40 frames, roundup(20 x 8, 32) = 160 px;
  // floors 2 x overlap: 80 frames, 320 px; grid lcm(2, 8) = 8 frames, lcm(8, 32) = 32 px.
  // Weights 3e9 B; stage-5 token 256 x 2 x 5 = 2560 B. Expected layouts: the reference's
  // recommended_decode_tiling_config(CHUNKED_EAGER) on the same inputs.
  DiffusionTilingBudget b;
  b.model_bytes = 3000000000;
  b.free_bytes = 80 * kGiB;  // 121 x 1024 x 1536 whole: 12.6 M tokens (32 GB) fit
  tiling::TileSizeConfig c = recommended_decode_tiling(g, 1024, 1536, 121, b);
  EXPECT_LAYOUT(c, 128, 1024, 1536);
  EXPECT_EQ(c.frames.overlap, 40);
  EXPECT_EQ(c.width.overlap, 160);
  b.free_bytes = 24 * kGiB;
  EXPECT_LAYOUT(recommended_decode_tiling(g, 1024, 1536, 121, b), 128, 1024, 640);
  b.free_bytes = 12 * kGiB;
  EXPECT_LAYOUT(recommended_decode_tiling(g, 1024, 1536, 121, b), 128, 448, 448);
  b.free_bytes = 24 * kGiB;
  EXPECT_LAYOUT(recommended_decode_tiling(g, 1024, 1536, 241, b), 144, 1024, 640);
  b.free_bytes = 6 * kGiB;
  EXPECT_LAYOUT(recommended_decode_tiling(g, 512, 768, 121, b), 80, 352, 320);
  // Every layout passes TileSizeConfig's own checks on both grids.
  tiling::validate(c, tiling::kVideoScaleFactors, {1, 121, 1024, 1536});
  tiling::validate(c, g.pixel_scale, {1, 121, 1024, 1536});
}

}  // namespace
}  // namespace ltx::diffusion_tiling_test

// Local to this file (unity builds compile it together with others).
#undef EXPECT_LAYOUT
