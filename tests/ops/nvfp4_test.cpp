// NVFP4 weights on the CPU (the reference for the CUDA tests): the E2M1 grid and its rounding,
// the E4M3 block scale, the nibble order, the tiled scale layout, and the quantiser /
// dequantiser pair (op_types/nvfp4.h, ops/nvfp4.h).
#include "ops/nvfp4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "core/dtype_bits.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::random_tensor;

TEST(Nvfp4Rules, E2m1CodesDecodeToTheGrid) {
  const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t c = 0; c < 8; ++c) {
    EXPECT_EQ(ops::e2m1_to_f32(c), grid[c]) << int(c);
    EXPECT_EQ(ops::e2m1_to_f32(static_cast<uint8_t>(c | 8)), -grid[c]) << int(c);
    // Every grid value encodes to its own code.
    EXPECT_EQ(ops::f32_to_e2m1(grid[c]), c) << grid[c];
    if (c > 0) {
      EXPECT_EQ(ops::f32_to_e2m1(-grid[c]), c | 8) << grid[c];
    }
  }
}

TEST(Nvfp4Rules, E2m1RoundsToNearestTiesToEvenAndSaturates) {
  // Midpoints go to the code with an even mantissa bit.
  EXPECT_EQ(ops::f32_to_e2m1(0.25f), 0);
  EXPECT_EQ(ops::f32_to_e2m1(0.75f), 2);
  EXPECT_EQ(ops::f32_to_e2m1(1.25f), 2);
  EXPECT_EQ(ops::f32_to_e2m1(1.75f), 4);
  EXPECT_EQ(ops::f32_to_e2m1(2.5f), 4);
  EXPECT_EQ(ops::f32_to_e2m1(3.5f), 6);
  EXPECT_EQ(ops::f32_to_e2m1(5.0f), 6);
  EXPECT_EQ(ops::f32_to_e2m1(-3.5f), 0xE);
  // Just past a midpoint goes up, just below goes down.
  EXPECT_EQ(ops::f32_to_e2m1(std::nextafter(0.25f, 1.0f)), 1);
  EXPECT_EQ(ops::f32_to_e2m1(std::nextafter(0.75f, 0.0f)), 1);
  EXPECT_EQ(ops::f32_to_e2m1(std::nextafter(5.0f, 6.0f)), 7);
  EXPECT_EQ(ops::f32_to_e2m1(std::nextafter(5.0f, 0.0f)), 6);
  EXPECT_EQ(ops::f32_to_e2m1(2.7f), 5);
  // Saturation, signed zero, NaN.
  EXPECT_EQ(ops::f32_to_e2m1(7.0f), 7);
  EXPECT_EQ(ops::f32_to_e2m1(1e30f), 7);
  EXPECT_EQ(ops::f32_to_e2m1(std::numeric_limits<float>::infinity()), 7);
  EXPECT_EQ(ops::f32_to_e2m1(-std::numeric_limits<float>::infinity()), 0xF);
  EXPECT_EQ(ops::f32_to_e2m1(-0.1f), 8);
  EXPECT_EQ(ops::f32_to_e2m1(std::numeric_limits<float>::quiet_NaN()), 7);
}

TEST(Nvfp4Rules, BlockScaleIsE4m3OfAmaxOverSixOverTensorScale) {
  const auto e4m3 = [](float v) { return dtype_bits::f32_to_f8e4m3fn(v); };
  EXPECT_EQ(ops::nvfp4_block_scale(6.0f, 1.0f), e4m3(1.0f));
  EXPECT_EQ(ops::nvfp4_block_scale(12.0f, 0.5f), e4m3(4.0f));
  // 1.0625 lies halfway between e4m3's 1.0 and 1.125: even mantissa (1.0) wins; 1.1875 lies
  // between 1.125 and 1.25: 1.25 (even) wins.
  EXPECT_EQ(ops::nvfp4_block_scale(6.375f, 1.0f), e4m3(1.0f));
  EXPECT_EQ(ops::nvfp4_block_scale(7.125f, 1.0f), e4m3(1.25f));
  // Capped at 448 before the cast; a zero tensor scale gives a zero block scale.
  EXPECT_EQ(ops::nvfp4_block_scale(1e6f, 1.0f), e4m3(448.0f));
  EXPECT_EQ(ops::nvfp4_block_scale(6.0f, 0.0f), 0);
  EXPECT_EQ(ops::nvfp4_block_scale(0.0f, 1.0f), 0);
  // The two divisions are separate roundings: (a / 6) / s, not a / (6 s).
  const float a = 0.7f, s = 3e-4f;
  EXPECT_EQ(ops::nvfp4_block_scale(a, s), e4m3(std::min((a / 6.0f) / s, 448.0f)));
  EXPECT_EQ(ops::nvfp4_block_multiplier(e4m3(2.0f), 0.5f), 1.0f);
  EXPECT_EQ(ops::nvfp4_block_multiplier(0, 0.5f), 0.0f);
}

TEST(Nvfp4Rules, ScaleLayoutIsCublasTiles) {
  // Within a 128x4 tile: row r at (r % 32) * 16 + (r / 32) * 4, its 4 columns consecutive.
  EXPECT_EQ(ops::nvfp4_scale_offset(0, 0, 8), 0);
  EXPECT_EQ(ops::nvfp4_scale_offset(0, 3, 8), 3);
  EXPECT_EQ(ops::nvfp4_scale_offset(1, 0, 8), 16);
  EXPECT_EQ(ops::nvfp4_scale_offset(32, 0, 8), 4);
  EXPECT_EQ(ops::nvfp4_scale_offset(127, 2, 8), 31 * 16 + 3 * 4 + 2);
  // Tiles run along the columns first, then down the rows.
  EXPECT_EQ(ops::nvfp4_scale_offset(0, 4, 8), 512);
  EXPECT_EQ(ops::nvfp4_scale_offset(128, 0, 8), 1024);
  EXPECT_EQ(ops::nvfp4_scale_offset(129, 5, 8), 1536 + 16 + 1);
  // A bijection onto the padded array.
  std::set<int64_t> seen;
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t c = 0; c < 8; ++c) seen.insert(ops::nvfp4_scale_offset(r, c, 8));
  EXPECT_EQ(seen.size(), 256u * 8u);
  EXPECT_EQ(*seen.rbegin(), 256 * 8 - 1);
  EXPECT_EQ(ops::nvfp4_block_scales_shape(130, 48), Shape({256, 4}));
  EXPECT_EQ(ops::nvfp4_block_scales_shape(128, 64), Shape({128, 4}));
}

TEST(Nvfp4Quantize, PacksElementTwoJInTheHighNibble) {
  std::vector<float> v(16, 0.0f);
  v[0] = 6.0f;    // code 7
  v[1] = -6.0f;   // code 15
  v[2] = 3.0f;    // code 5 (scale 1 after the block scale), high nibble of byte 1
  v[3] = 0.5f;    // code 1
  const ops::Nvfp4Weight q = ops::quantize_nvfp4(Tensor::from_vector(v, {1, 16}));
  ASSERT_EQ(q.packed.shape(), Shape({1, 8}));
  ASSERT_EQ(q.block_scales.shape(), Shape({128, 4}));
  const auto* p = q.packed.data<uint8_t>();
  EXPECT_EQ(p[0], 0x7F);
  EXPECT_EQ(p[1], 0x51);
  for (int j = 2; j < 8; ++j) EXPECT_EQ(p[j], 0) << j;
  EXPECT_EQ(static_cast<float>(q.tensor_scale.item()), 6.0f * ops::kNvfp4InvGlobalRange);
}

// The quantiser spelled out element by element from the rules, for a [out, in] f32 weight.
struct Spelled {
  std::vector<uint8_t> codes;   // [out, in], one code each
  std::vector<uint8_t> scales;  // [out, in/16], row-major (not tiled)
  float tensor_scale = 0.0f;
};
Spelled spell(const std::vector<float>& w, int64_t out, int64_t in) {
  Spelled s;
  float amax = 0.0f;
  for (float v : w) amax = std::max(amax, std::fabs(v));
  s.tensor_scale = amax * ops::kNvfp4InvGlobalRange;
  for (int64_t r = 0; r < out; ++r)
    for (int64_t b = 0; b < in / 16; ++b) {
      float bmax = 0.0f;
      for (int64_t i = 0; i < 16; ++i) bmax = std::max(bmax, std::fabs(w[r * in + b * 16 + i]));
      const uint8_t sc = dtype_bits::f32_to_f8e4m3fn(std::min((bmax / 6.0f) / s.tensor_scale, 448.0f));
      s.scales.push_back(sc);
    }
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) {
      const float bs = dtype_bits::f8e4m3fn_to_f32(s.scales[r * (in / 16) + c / 16]);
      const float total = s.tensor_scale * bs;
      const float m = total > 0.0f ? 1.0f / total : 0.0f;
      s.codes.push_back(ops::f32_to_e2m1(w[r * in + c] * m));
    }
  return s;
}

TEST(Nvfp4Quantize, MatchesTheRulesSpelledOutAndDequantisesToThem) {
  const int64_t out = 130, in = 48;  // rows past one tile, in/16 = 3 padded to 4
  const Tensor w = random_tensor({out, in}, 7, -0.3f, 0.3f).to(DType::BF16).to(DType::F32);
  // Blocks of very different magnitude, so the block scales differ.
  std::vector<float> v = w.to_float_vector();
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < 16; ++c) v[r * in + c] *= 1e-3f;
  const Tensor wv = Tensor::from_vector(v, {out, in});
  const Spelled s = spell(v, out, in);
  const ops::Nvfp4Weight q = ops::quantize_nvfp4(wv);
  EXPECT_EQ(static_cast<float>(q.tensor_scale.item()), s.tensor_scale);
  const auto* p = q.packed.data<uint8_t>();
  const auto* sc = static_cast<const uint8_t*>(q.block_scales.raw_data());
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t c = 0; c < in; c += 2) {
      const uint8_t byte = p[r * in / 2 + c / 2];
      ASSERT_EQ(byte >> 4, s.codes[r * in + c]) << r << "," << c;
      ASSERT_EQ(byte & 15, s.codes[r * in + c + 1]) << r << "," << c + 1;
    }
    for (int64_t b = 0; b < in / 16; ++b)
      ASSERT_EQ(sc[ops::nvfp4_scale_offset(r, b, 4)], s.scales[r * (in / 16) + b]) << r << "," << b;
  }
  // The padding (rows 130..255, column 3) stays zero.
  int64_t nonzero_padding = 0;
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t b = 0; b < 4; ++b)
      if ((r >= out || b >= 3) && sc[ops::nvfp4_scale_offset(r, b, 4)] != 0) ++nonzero_padding;
  EXPECT_EQ(nonzero_padding, 0);

  const std::vector<float> d = ops::dequantize_nvfp4(q, DType::F32).to_float_vector();
  const std::vector<float> d16 = ops::dequantize_nvfp4(q, DType::BF16).to(DType::F32).to_float_vector();
  double err2 = 0, ref2 = 0;
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) {
      const int64_t i = r * in + c;
      const float bs = dtype_bits::f8e4m3fn_to_f32(s.scales[r * (in / 16) + c / 16]);
      const float expect = ops::e2m1_to_f32(s.codes[i]) * (s.tensor_scale * bs);
      ASSERT_EQ(d[i], expect) << i;
      ASSERT_EQ(d16[i], dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(expect))) << i;
      err2 += (d[i] - v[i]) * (d[i] - v[i]);
      ref2 += v[i] * v[i];
    }
  // 8 levels a sign per block: a few percent of rel L2 error.
  EXPECT_LT(std::sqrt(err2 / ref2), 0.12);
}

TEST(Nvfp4Quantize, AllZeroWeightGivesZeros) {
  const ops::Nvfp4Weight q = ops::quantize_nvfp4(Tensor::zeros({4, 32}, DType::BF16));
  EXPECT_EQ(q.tensor_scale.item(), 0.0);
  for (float x : ops::dequantize_nvfp4(q, DType::F32).to_float_vector()) EXPECT_EQ(x, 0.0f);
}

TEST(Nvfp4Quantize, RejectsBadShapes) {
  EXPECT_ERROR_HAS(ops::quantize_nvfp4(Tensor::zeros({4, 24})), "multiple of 16");
  ops::Nvfp4Weight q = ops::quantize_nvfp4(Tensor::zeros({4, 32}));
  q.block_scales = Tensor::zeros({4, 2}, DType::F8E4M3FN);
  EXPECT_ERROR_HAS(ops::dequantize_nvfp4(q, DType::F32), ".weight_scale must be float8_e4m3fn [128, 4]");
  EXPECT_ERROR_HAS(ops::dequantize_nvfp4(ops::quantize_nvfp4(Tensor::zeros({4, 32})), DType::F16),
                   "dtype must be bf16 or f32");
}

}  // namespace
}  // namespace ltx
