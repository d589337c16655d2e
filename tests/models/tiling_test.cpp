// Tile geometry (splits, masks, mappings, configs) against hand-worked reference values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/dtype_bits.h"
#include "models/tiling.h"
#include "support/test_support.h"

namespace ltx::tiling_test {
namespace {

using namespace models::tiling;

Intervals iv(std::initializer_list<Interval> l) { return Intervals(l); }

void expect_floats(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-7) << i;
}

TEST(Tiling, TrapezoidalMasksMatchTheReference) {
  // Values recorded by the reference in the golden notes.
  expect_floats(trapezoidal_mask_1d(3, 0, 2, true), {1.0, 0.6666666, 0.3333333});
  expect_floats(trapezoidal_mask_1d(4, 3, 0, true), {0.0, 0.3333333, 0.6666666, 1.0});
  expect_floats(trapezoidal_mask_1d(16, 8, 0, false),
                {0.1111111, 0.2222222, 0.3333333, 0.4444444, 0.5555556, 0.6666667, 0.7777778,
                 0.8888889, 1, 1, 1, 1, 1, 1, 1, 1});
  // Ramps longer than the mask are clamped; overlapping ramps multiply.
  expect_floats(trapezoidal_mask_1d(2, 5, 0, false), {1.0 / 3, 2.0 / 3});
  expect_floats(trapezoidal_mask_1d(3, 2, 2, false), {1.0 / 3 * 1.0, 2.0 / 3 * 2.0 / 3, 1.0 / 3});
  expect_floats(trapezoidal_mask_1d(4, 0, 0), {1, 1, 1, 1});
  EXPECT_THROW(trapezoidal_mask_1d(0, 0, 0), Error);
  expect_floats(rectangular_mask_1d(5, 1, 2), {0, 1, 1, 0, 0});
  // torch.linspace's two-sided evaluation is exact at both ends.
  const auto l = linspace_f32(1.f, 0.f, 7);
  EXPECT_EQ(l.front(), 1.f);
  EXPECT_EQ(l.back(), 0.f);
}

TEST(Tiling, SplitsMatchTheReference) {
  EXPECT_EQ(split_by_size(3, 1)(3), iv({{0, 3, 0, 0}}));
  EXPECT_EQ(split_by_size(3, 1)(7), iv({{0, 3, 0, 1}, {2, 5, 1, 1}, {4, 7, 1, 0}}));
  EXPECT_EQ(split_by_size(3, 1)(6), iv({{0, 3, 0, 1}, {2, 5, 1, 1}, {4, 6, 1, 0}}));
  // min_tile_size grows the short last tile leftwards.
  EXPECT_EQ(split_by_size(4, 1, 3)(8), iv({{0, 4, 0, 1}, {3, 7, 1, 2}, {5, 8, 2, 0}}));
  // README-vae 7.7: both causal tiles start at 0 for 3 latents, tile 2, overlap 1.
  EXPECT_EQ(split_temporal_causal(2, 1)(3), iv({{0, 2, 0, 1}, {0, 3, 2, 0}}));
  EXPECT_EQ(split_temporal_causal(3, 1)(4), iv({{0, 3, 0, 1}, {1, 4, 2, 0}}));
  EXPECT_EQ(split_temporal_causal(3, 2)(5), iv({{0, 3, 0, 2}, {0, 4, 3, 2}, {1, 5, 3, 0}}));
  EXPECT_EQ(split_temporal_causal(10, 3)(16), iv({{0, 10, 0, 3}, {6, 16, 4, 0}}));
  // Counts: remainders go to the first tiles.
  EXPECT_EQ(split_by_count(3, 1)(5), iv({{0, 3, 0, 1}, {2, 4, 1, 1}, {3, 5, 1, 0}}));
  EXPECT_EQ(split_by_count(2, 1)(4), iv({{0, 3, 0, 1}, {2, 4, 1, 0}}));
  EXPECT_EQ(split_by_count(1, 0)(4), iv({{0, 4, 0, 0}}));
  EXPECT_EQ(split_by_count_temporal_causal(2, 1)(5), iv({{0, 3, 0, 1}, {1, 5, 2, 0}}));
  EXPECT_THROW(split_by_count(6)(5), Error);
  EXPECT_THROW(split_by_size(0, 0), Error);
  EXPECT_THROW(split_by_size(3, 3), Error);
  EXPECT_THROW(split_by_count(0), Error);
}

// For any size/overlap, the trapezoid masks of split_by_size partition unity when no tile's ramps
// overlap, which is what lets the decoder skip the weight division.
TEST(Tiling, SpatialMasksPartitionUnity) {
  for (int64_t size = 2; size <= 6; ++size)
    for (int64_t overlap = 0; overlap < size; ++overlap)
      for (int64_t len = 1; len <= 17; ++len) {
        const Intervals ivs = split_by_size(size, overlap)(len);
        std::vector<double> acc(static_cast<size_t>(len * 32), 0.0);
        bool ramps_overlap = false;
        for (const Interval& i : ivs) {
          const Mapped m = map_spatial_slice(i, 32);
          ramps_overlap = ramps_overlap || i.left_ramp + i.right_ramp > i.end - i.start;
          for (int64_t p = m.start; p < *m.stop; ++p) acc[p] += m.mask[p - m.start];
        }
        if (ramps_overlap) continue;
        for (double a : acc) ASSERT_NEAR(a, 1.0, 1e-6) << size << "/" << overlap << " on " << len;
      }
}

// The diffusion decoder's blend (its reference's _decode_temporal_group_isolated and as_fhwc
// emit) with f16 buffers for bf16 features: each tile rounded to f16, times the f32 masks, summed
// in f32 and stored in f16; the overlap of two temporal groups summed the same way; the finished
// frames cast to bf16 first, then divided in f32 by the weights clamped to f16's smallest normal
// and rounded to bf16. Worked here with scalar roundings, element by element.
TEST(Tiling, BlendInF16BuffersEmitsLikeTheDiffusionReference) {
  const auto r16 = [](double v) {
    return dtype_bits::f16_to_f32(dtype_bits::f32_to_f16(static_cast<float>(v)));
  };
  const auto rb = [](double v) {
    return dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(static_cast<float>(v)));
  };
  const Shape full = {1, 1, 4, 1, 2};
  Tile a, b;  // frames [0, 3) and [1, 4); their frame masks do not sum to one
  a.in = b.in = {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {0, 2}};
  a.out = {{0, 1}, {0, 1}, {0, 3}, {0, 1}, {0, 2}};
  b.out = {{0, 1}, {0, 1}, {1, 4}, {0, 1}, {0, 2}};
  a.masks = {{1.f}, {1.f}, {0.9f, 0.8f, 0.3f}, {1.f}, {1.f, 1.f}};
  b.masks = {{1.f}, {1.f}, {0.7f, 0.6f, 1e-5f}, {1.f}, {1.f, 1.f}};
  const std::vector<Tile> tiles = {a, b};
  ASSERT_FALSE(masks_are_complementary(tiles, full));
  // Pixel values with more mantissa than f16 keeps.
  const auto pixel = [](int tile, int64_t f, int64_t w) {
    return 0.123456789 * (tile + 1) + 0.0101 * static_cast<double>(f) - 0.3 * static_cast<double>(w);
  };
  std::vector<double> got(8, 0.0);
  blend_tile_groups(
      tiles, full,
      [&](const Tile& t, GroupBuffers& buffers, int64_t) {
        const int which = t.out[2].start == 0 ? 0 : 1;
        std::vector<float> px;
        for (int64_t f = 0; f < 3; ++f)
          for (int64_t w = 0; w < 2; ++w) px.push_back(static_cast<float>(pixel(which, f, w)));
        const Tensor pixels = Tensor::from_vector(px, {1, 1, 3, 1, 2}).to(DType::F16).to(DType::F32);
        ASSERT_EQ(buffers.values().dtype(), DType::F16);
        accumulate_into(buffers.values(), scale_by_masks_1d(pixels, t.masks));
        accumulate_into(buffers.weights(),
                        scale_by_masks_1d(Tensor::full({1, 1, 3, 1, 2}, 1.0), t.masks));
      },
      [&](const Tensor& frames, int64_t first) {
        EXPECT_EQ(frames.dtype(), DType::BF16);
        const std::vector<float> v = frames.contiguous().to_float_vector();
        for (int64_t i = 0; i < frames.size(2); ++i)
          for (int64_t w = 0; w < 2; ++w) got[static_cast<size_t>((first + i) * 2 + w)] = v[static_cast<size_t>(i * 2 + w)];
      },
      Device::cpu(), DType::F16, BlendEmit{DType::BF16});
  const double floor16 = 6.103515625e-05;
  for (int64_t f = 0; f < 4; ++f) {
    for (int64_t w = 0; w < 2; ++w) {
      double value = 0, weight = 0;  // f16 sums, tile A first (the earlier group's stub)
      if (f < 3) {
        value = r16(r16(pixel(0, f, w)) * static_cast<double>(a.masks[2][f]));
        weight = r16(a.masks[2][f]);
      }
      if (f >= 1) {
        const double vb = r16(r16(pixel(1, f - 1, w)) * static_cast<double>(b.masks[2][f - 1]));
        const double wb = r16(b.masks[2][f - 1]);
        value = f < 3 ? r16(static_cast<float>(value + vb)) : vb;
        weight = f < 3 ? r16(static_cast<float>(weight + wb)) : wb;
      }
      const double want = rb(static_cast<float>(rb(value) / std::max(weight, floor16)));
      EXPECT_EQ(got[static_cast<size_t>(f * 2 + w)], want) << "frame " << f << ", w " << w;
    }
  }
}

TEST(Tiling, MappingsAndTiles) {
  const Mapped t = map_temporal_slice({1, 4, 2, 0}, 8);
  EXPECT_EQ(t.start, 8);
  EXPECT_EQ(*t.stop, 25);
  EXPECT_EQ(t.mask.size(), 17u);
  EXPECT_EQ(t.mask[0], 0.f);  // temporal ramps start from 0
  EXPECT_NEAR(t.mask[9], 1.0, 1e-7);
  const Mapped s = map_spatial_slice({1, 3, 1, 0}, 32);
  EXPECT_EQ(s.start, 32);
  EXPECT_EQ(*s.stop, 96);
  EXPECT_NEAR(s.mask[0], 1.0 / 33, 1e-7);

  // Product order: axis 0 slowest, the last axis fastest; open ranges end at the output size.
  const std::vector<Tile> tiles =
      create_tiles({1, 4, 3}, {split_default(), split_by_size(2, 1), split_by_size(2, 1)},
                   {default_mapping(), spatial_slice_mapping(2), spatial_slice_mapping(2)}, {1, 8, 6});
  ASSERT_EQ(tiles.size(), 6u);
  EXPECT_EQ(tiles[0].out[0], (Range{0, 1}));
  EXPECT_EQ(tiles[1].in[1], (Range{0, 2}));
  EXPECT_EQ(tiles[1].in[2], (Range{1, 3}));
  EXPECT_EQ(tiles[2].in[1], (Range{1, 3}));
  EXPECT_TRUE(masks_are_complementary(tiles, {1, 8, 6}));
  EXPECT_EQ(group_tiles_by_temporal_slice(
                create_tiles({1, 1, 3, 1, 1},
                             {split_default(), split_default(), split_by_size(2, 1),
                              split_default(), split_by_size(1, 0)},
                             {default_mapping(), default_mapping(), temporal_slice_mapping(8),
                              default_mapping(), default_mapping()},
                             {1, 1, 17, 1, 1}))
                .size(),
            2u);
}

TEST(Tiling, SizeConfigsValidateAndSplitLikeTheReference) {
  const ScaleFactors s{8, 32, 32};
  const TileSizeConfig d = TileSizeConfig::default_config();
  EXPECT_EQ(d.frames.tile_size, 80);
  EXPECT_EQ(d.height.overlap, 64);
  const Splitters sp = d.to_splitters(s);
  EXPECT_EQ(sp[0](16), split_temporal_causal(10, 3)(16));
  EXPECT_EQ(sp[1](32), split_by_size(24, 2)(32));
  EXPECT_EQ(d.video_chunks_number(121), 3);
  EXPECT_EQ(TileSizeConfig{}.video_chunks_number(121), 1);
  // Pipelines' automatic tiling for 1536x1024: aspect-coupled spatial tiles, 80/24 frames.
  const TileSizeConfig a = auto_tiling_config(1024, 1536);
  EXPECT_EQ(a.height.tile_size, 512);
  EXPECT_EQ(a.width.tile_size, 768);
  EXPECT_EQ(a.frames.tile_size, 80);
  EXPECT_EQ(a.height.overlap, 64);
  // round() is half-to-even: 24 * 5 / 16 = 7.5 -> 8, 24 * 7 / 16 = 10.5 -> 10.
  EXPECT_EQ(auto_tiling_config(160, 512).height.tile_size, 8 * 32);
  EXPECT_EQ(auto_tiling_config(224, 512).height.tile_size, 10 * 32);

  EXPECT_NO_THROW(d.validate(s, {1, 121, 1024, 1536}));
  EXPECT_THROW(d.validate(s, {1, 120, 1024, 1536}), Error);  // frames not 1 + 8k
  EXPECT_THROW(d.validate(s, {1, 121, 1000, 1536}), Error);  // height off the grid
  TileSizeConfig odd = d;
  odd.width = DimensionSizeConfig(700, 64);
  EXPECT_THROW(odd.validate(s, {1, 121, 1024, 1536}), Error);  // not divisible by 32
  odd.width = DimensionSizeConfig(32, 0);
  EXPECT_THROW(odd.validate(s, {1, 121, 1024, 1536}), Error);  // below 2 latents
  EXPECT_THROW(DimensionSizeConfig(64, 64), Error);
  EXPECT_THROW(DimensionSizeConfig(0, 8), Error);
  EXPECT_THROW(DimensionTilingConfig(0, 0), Error);
  EXPECT_THROW(validate_overlap(TilingConfig(TileSizeConfig{DimensionSizeConfig(24, 8), {}, {}}),
                                16, 64),
               Error);
  EXPECT_NO_THROW(validate_overlap(TilingConfig(TileCountConfig{}), 16, 64));
  TileCountConfig c{DimensionTilingConfig(3, 1), {}, DimensionTilingConfig(2, 0)};
  EXPECT_NO_THROW(c.validate(s, {1, 33, 64, 64}));
  EXPECT_THROW(c.validate(s, {1, 9, 64, 64}), Error);  // 3 tiles over 2 latent frames
  EXPECT_EQ(c.video_chunks_number(33), 3);
}

TEST(Tiling, ConfigsParseFromJson) {
  const auto s = tiling_config_from_json(nlohmann::json::parse(
      R"({"type": "TileSizeConfig", "frames": {"tile_size": 24, "overlap": 8},
          "height": {"tile_size": 0, "overlap": 0}, "width": {"tile_size": 64, "overlap": 32}})"));
  ASSERT_TRUE(std::holds_alternative<TileSizeConfig>(s));
  EXPECT_EQ(std::get<TileSizeConfig>(s).frames.overlap, 8);
  EXPECT_TRUE(width_tiled(s));
  EXPECT_FALSE(height_tiled(s));
  const auto c = tiling_config_from_json(
      nlohmann::json::parse(R"({"type": "TileCountConfig", "width": {"num_tiles": 2}})"));
  ASSERT_TRUE(std::holds_alternative<TileCountConfig>(c));
  EXPECT_EQ(std::get<TileCountConfig>(c).width.num_tiles, 2);
  EXPECT_FALSE(frames_tiled(c));
  EXPECT_THROW(tiling_config_from_json(nlohmann::json::parse(R"({"type": "Foo"})")), Error);
  EXPECT_THROW(tiling_config_from_json(nlohmann::json::parse(R"({"frames": {"tile_size": "x"}})")),
               Error);
  EXPECT_NE(describe(s).find("24/8"), std::string::npos);
}

}  // namespace
}  // namespace ltx::tiling_test
