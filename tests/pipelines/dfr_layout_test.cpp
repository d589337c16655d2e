// DFR canvas layout (pipelines/dfr_layout.h) against values worked out by hand from the reference's
// dfr_layout.py: segment choice (least padding, ties to 32), canvas + keyframe positions, tile
// windows with their lead-in / drop prefix / anchors / slots, the stitch, and its errors.
#include "pipelines/dfr_layout.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using pipelines::dfr::TileRange;
namespace dfr = pipelines::dfr;

TEST(DfrLayout, SegmentLengthPadsLeastAndTiesGoToTheLongerSegment) {
  // content 120: pad 0 with 24, 8 with 32.  64: 8 vs 0.  96: 0 vs 0 (tie -> 32).
  // 8: 16 vs 24.  56: 16 vs 8.  40: 8 vs 24.  1: 23 vs 31.
  EXPECT_EQ(dfr::choose_segment_length(120), 24);
  EXPECT_EQ(dfr::choose_segment_length(64), 32);
  EXPECT_EQ(dfr::choose_segment_length(96), 32);
  EXPECT_EQ(dfr::choose_segment_length(8), 24);
  EXPECT_EQ(dfr::choose_segment_length(56), 32);
  EXPECT_EQ(dfr::choose_segment_length(40), 24);
  EXPECT_EQ(dfr::choose_segment_length(1), 24);
  EXPECT_ERROR_HAS(dfr::choose_segment_length(0), "must be >= 1");
}

TEST(DfrLayout, CanvasPadsToWholeSegmentsWithAKeyframeAtEverySegmentEnd) {
  auto c = dfr::resolve_canvas(121);
  EXPECT_EQ(c.num_frames, 121);
  EXPECT_EQ(c.segment, 24);
  EXPECT_EQ(c.positions, (std::vector<int64_t>{24, 48, 72, 96, 120}));

  c = dfr::resolve_canvas(9);  // 8 content frames padded to one 24-frame segment
  EXPECT_EQ(c.num_frames, 25);
  EXPECT_EQ(c.segment, 24);
  EXPECT_EQ(c.positions, (std::vector<int64_t>{24}));

  c = dfr::resolve_canvas(57);  // 56 -> 64 with 32-frame segments (24 would pad 16)
  EXPECT_EQ(c.num_frames, 65);
  EXPECT_EQ(c.segment, 32);
  EXPECT_EQ(c.positions, (std::vector<int64_t>{32, 64}));

  c = dfr::resolve_canvas(97);
  EXPECT_EQ(c.num_frames, 97);
  EXPECT_EQ(c.segment, 32);
  EXPECT_EQ(c.positions, (std::vector<int64_t>{32, 64, 96}));

  EXPECT_ERROR_HAS(dfr::resolve_canvas(1), "at least 2 pixel frames");
  EXPECT_ERROR_HAS(dfr::resolve_canvas(0), "must be >= 1");
  EXPECT_ERROR_HAS(dfr::resolve_canvas(120), "not 8k + 1");
}

TEST(DfrLayout, PixelToLatentIndexNeedsALatentBorder) {
  EXPECT_EQ(dfr::pixel_to_latent_index(0), 0);
  EXPECT_EQ(dfr::pixel_to_latent_index(48), 6);
  EXPECT_EQ(dfr::pixel_to_latent_index(12, 4), 3);
  EXPECT_ERROR_HAS(dfr::pixel_to_latent_index(12), "not on the x8 latent border");
  EXPECT_ERROR_HAS(dfr::pixel_to_latent_index(-8), "must be >= 0");
}

TEST(DfrLayout, OwnedSegmentsSplitLargestFirst) {
  EXPECT_EQ(dfr::owned_segment_counts(5, 2), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(dfr::owned_segment_counts(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(dfr::owned_segment_counts(4, 4), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(dfr::owned_segment_counts(1, 1), (std::vector<int64_t>{1}));
  EXPECT_ERROR_HAS(dfr::owned_segment_counts(0, 1), "segment count");
  EXPECT_ERROR_HAS(dfr::owned_segment_counts(3, 0), "tile count");
}

TEST(DfrLayout, FirstRoundOf121FramesGivesTwoTilesMeetingAtTheSharedSeam) {
  // 121 frames, segment 24, round 1: 241 frames, seams at 2 * [24 .. 120] = [48, 96, 144, 192, 240].
  // 5 segments in 2 tiles -> owned 3 + 2. Tile 1 owns segments 3..4 and reaches one back to 96.
  const auto tiles = dfr::tile_ranges({48, 96, 144, 192, 240}, 241, 2);
  ASSERT_EQ(tiles.size(), 2u);
  const TileRange t0{0, 144, 0, 19, {48, 96, 144}, {24, 72, 120}, 0};
  // drop: latent(144) - latent(96) = 6 for the lead-in, + 1 for the seam latent tile 0 keeps.
  const TileRange t1{96, 240, 12, 31, {96, 144, 192, 240}, {120, 168, 216}, 7};
  EXPECT_EQ(tiles[0], t0);
  EXPECT_EQ(tiles[1], t1);
  EXPECT_EQ(tiles[1].local_frames(), 145);
  EXPECT_EQ(tiles[0].latent_frames() + tiles[1].latent_frames() - tiles[1].drop_latent_prefix, (241 - 1) / 8 + 1);
}

TEST(DfrLayout, SecondRoundOf121FramesGivesFourTiles) {
  // Round 2 after round 1 carried every multiple of 24 up to 240: seams 48, 96, ..., 480 (10),
  // owned 3 + 3 + 2 + 2.
  std::vector<int64_t> seams;
  for (int64_t p = 48; p <= 480; p += 48) seams.push_back(p);
  const auto tiles = dfr::tile_ranges(seams, 481, 4);
  ASSERT_EQ(tiles.size(), 4u);
  EXPECT_EQ(tiles[0], (TileRange{0, 144, 0, 19, {48, 96, 144}, {24, 72, 120}, 0}));
  EXPECT_EQ(tiles[1], (TileRange{96, 288, 12, 37, {96, 144, 192, 240, 288}, {120, 168, 216, 264}, 7}));
  EXPECT_EQ(tiles[2], (TileRange{240, 384, 30, 49, {240, 288, 336, 384}, {264, 312, 360}, 7}));
  EXPECT_EQ(tiles[3], (TileRange{336, 480, 42, 61, {336, 384, 432, 480}, {360, 408, 456}, 7}));
  int64_t total = 0;
  for (const auto& t : tiles) total += t.latent_frames() - t.drop_latent_prefix;
  EXPECT_EQ(total, 61);
}

TEST(DfrLayout, TilesAreClampedToTheSegmentCountAndALeadInCanReachFrameZero) {
  // 9 frames -> canvas 25 [24]; round 1: 49 frames, one seam at 48 -> one tile despite 2 asked.
  auto tiles = dfr::tile_ranges({48}, 49, 2);
  ASSERT_EQ(tiles.size(), 1u);
  EXPECT_EQ(tiles[0], (TileRange{0, 48, 0, 7, {48}, {24}, 0}));
  // Round 2: seams 2 * [24, 48]; tile 1's lead-in reaches back to frame 0 (no anchor there).
  tiles = dfr::tile_ranges({48, 96}, 97, 4);
  ASSERT_EQ(tiles.size(), 2u);
  EXPECT_EQ(tiles[0], (TileRange{0, 48, 0, 7, {48}, {24}, 0}));
  EXPECT_EQ(tiles[1], (TileRange{0, 96, 0, 13, {48, 96}, {24, 72}, 7}));
  // With two segments of lead-in the window of tile 2 (of 3) starts at 0 as well.
  tiles = dfr::tile_ranges({32, 64, 96}, 97, 3, 8, 2);
  ASSERT_EQ(tiles.size(), 3u);
  EXPECT_EQ(tiles[2], (TileRange{0, 96, 0, 13, {32, 64, 96}, {16, 48, 80}, 9}));
}

TEST(DfrLayout, TileRangesRejectBadSeams) {
  EXPECT_ERROR_HAS(dfr::tile_ranges({48}, 1, 1), "num_frames >= 2");
  EXPECT_ERROR_HAS(dfr::tile_ranges({}, 49, 1), "no seam positions");
  EXPECT_ERROR_HAS(dfr::tile_ranges({40}, 49, 1), "terminal frame 48");
  EXPECT_ERROR_HAS(dfr::tile_ranges({32, 24, 48}, 49, 1), "strictly increasing");
  EXPECT_ERROR_HAS(dfr::tile_ranges({20, 48}, 49, 1), "not a multiple of the temporal scale");
  EXPECT_ERROR_HAS(dfr::tile_ranges({8, 48}, 49, 1), "under 2 latent frames");
  EXPECT_ERROR_HAS(dfr::tile_ranges({48}, 49, 1, 8, 0), "lead-in must be >= 1");
}

// A [1, 2, T, 1, 1] latent whose value at (c, t) is 100 * tag + 10 * c + t.
Tensor tagged(int64_t t, int64_t tag) {
  return test::make_ref(Shape{1, 2, t, 1, 1}, [&](const std::vector<int64_t>& i) {
           return static_cast<double>(100 * tag + 10 * i[1] + i[2]);
         }).to(DType::F32);
}

TEST(DfrLayout, StitchDropsEachTilesPrefix) {
  const auto tiles = dfr::tile_ranges({48, 96, 144, 192, 240}, 241, 2);
  const Tensor stitched = dfr::stitch_tile_latents({tagged(19, 0), tagged(19, 1)}, tiles);
  ASSERT_EQ(stitched.shape(), (Shape{1, 2, 31, 1, 1}));
  const std::vector<float> v = stitched.to_float_vector();
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t t = 0; t < 31; ++t) {
      // Global latents 0..18 from tile 0, 19..30 from tile 1's local 7..18.
      const float expected = t < 19 ? static_cast<float>(10 * c + t) : static_cast<float>(100 + 10 * c + (t - 12));
      EXPECT_EQ(v[static_cast<size_t>(c * 31 + t)], expected) << "c " << c << " t " << t;
    }
}

TEST(DfrLayout, StitchRejectsMismatchedTiles) {
  const auto tiles = dfr::tile_ranges({48, 96, 144, 192, 240}, 241, 2);
  EXPECT_ERROR_HAS(dfr::stitch_tile_latents({tagged(19, 0)}, tiles), "2 tiles but 1 tile latents");
  EXPECT_ERROR_HAS(dfr::stitch_tile_latents({}, {}), "no tile latents");
  EXPECT_ERROR_HAS(dfr::stitch_tile_latents({tagged(19, 0), tagged(18, 1)}, tiles), "T=18, expected 19");
  EXPECT_ERROR_HAS(dfr::stitch_tile_latents({Tensor::zeros({2, 19, 1, 1}), tagged(19, 1)}, tiles),
                   "must be [B, C, T, H, W]");
  auto bad = tiles;
  bad[1].drop_latent_prefix = 19;
  EXPECT_ERROR_HAS(dfr::stitch_tile_latents({tagged(19, 0), tagged(19, 1)}, bad), "drop_latent_prefix 19");
}

TEST(DfrLayout, RemapShiftsPositionsToTheTile) {
  EXPECT_EQ(dfr::remap_positions_to_local({96, 144, 240}, 96), (std::vector<int64_t>{0, 48, 144}));
  EXPECT_TRUE(dfr::remap_positions_to_local({}, 8).empty());
}

}  // namespace
}  // namespace ltx
