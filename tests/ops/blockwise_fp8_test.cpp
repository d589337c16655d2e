// Blockwise FP8 on the CPU (ops/quantized_linear.h): the reference for the CUDA tests.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype_bits.h"
#include "ops/linalg.h"
#include "ops/quantized_linear.h"
#include "support/test_support.h"

namespace ltx::blockwise_fp8_test {
namespace {

using test::error_of;
using test::non_contiguous_copy;
using test::random_tensor;

std::vector<float> e4m3_values(const Tensor& q) {
  const Tensor c = q.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  std::vector<float> out;
  for (int64_t i = 0; i < c.numel(); ++i) out.push_back(dtype_bits::f8e4m3fn_to_f32(p[i]));
  return out;
}

float round_bf16(float v) { return dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(v)); }

TEST(QuantizeFp8Blockwise, OneTileScalesByItsAmax) {
  // amax 8: m = 448 / 8 = 56, every product exact in e4m3.
  const Tensor w = Tensor::from_vector<float>({1.f, -2.f, 0.5f, 4.f, 0.f, -8.f}, {2, 3});
  const ops::Fp8Blockwise q = ops::quantize_fp8_blockwise(w);
  EXPECT_EQ(q.weight.dtype(), DType::F8E4M3FN);
  EXPECT_EQ(q.weight_scale.shape(), Shape({1, 1}));
  EXPECT_EQ(e4m3_values(q.weight), (std::vector<float>{56.f, -112.f, 28.f, 224.f, 0.f, -448.f}));
  // The reference stores 1 / (448 / amax), not amax / 448.
  EXPECT_EQ(q.weight_scale.to_float_vector()[0], 1.0f / (448.0f / 8.0f));
}

TEST(QuantizeFp8Blockwise, EachTileHasItsOwnScaleAndPartialTilesAtTheEdges) {
  // [130, 260]: tiles 2 x 3, the last row and column of tiles partial. Tile (r, c) holds the
  // value 2^(r + c) at one corner and 2^(r + c - 4) elsewhere.
  const int64_t n = 130, k = 260;
  std::vector<float> v(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = i / 128, c = j / 128;
      const bool corner = i % 128 == 0 && j % 128 == 0;
      v[static_cast<size_t>(i * k + j)] = std::ldexp(1.0f, static_cast<int>(r + c - (corner ? 0 : 4)));
    }
  const ops::Fp8Blockwise q = ops::quantize_fp8_blockwise(Tensor::from_vector(v, {n, k}));
  ASSERT_EQ(q.weight_scale.shape(), Shape({2, 3}));
  const std::vector<float> s = q.weight_scale.to_float_vector();
  const std::vector<float> qv = e4m3_values(q.weight);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 3; ++c) {
      const float amax = std::ldexp(1.0f, static_cast<int>(r + c));
      EXPECT_EQ(s[static_cast<size_t>(r * 3 + c)], 1.0f / (448.0f / amax)) << r << "," << c;
      EXPECT_EQ(qv[static_cast<size_t>((r * 128) * k + c * 128)], 448.0f);
      EXPECT_EQ(qv[static_cast<size_t>((r * 128 + 1) * k + c * 128 + 1)], 28.0f);  // 448 / 16
    }
}

TEST(QuantizeFp8Blockwise, RefusesZeroAndNonFiniteTiles) {
  std::vector<float> v(static_cast<size_t>(2 * 200), 1.0f);
  for (int64_t j = 128; j < 200; ++j) {
    v[static_cast<size_t>(j)] = 0.0f;
    v[static_cast<size_t>(200 + j)] = 0.0f;
  }
  const std::string zero = error_of([&] { (void)ops::quantize_fp8_blockwise(Tensor::from_vector(v, {2, 200})); });
  EXPECT_NE(zero.find("all zeros in its 128 x 128 tile (0, 1)"), std::string::npos) << zero;
  v[5] = std::numeric_limits<float>::infinity();
  v[130] = 1.0f;
  const std::string inf = error_of([&] { (void)ops::quantize_fp8_blockwise(Tensor::from_vector(v, {2, 200})); });
  EXPECT_NE(inf.find("NaN or inf in its 128 x 128 tile (0, 0)"), std::string::npos) << inf;
}

TEST(DequantizeFp8Blockwise, MultipliesEachTileByItsScaleAndRounds) {
  const Tensor w = random_tensor({200, 300}, 3, -2.f, 2.f);
  const ops::Fp8Blockwise q = ops::quantize_fp8_blockwise(w);
  const std::vector<float> qv = e4m3_values(q.weight);
  const std::vector<float> s = q.weight_scale.to_float_vector();
  const std::vector<float> d32 = ops::dequantize_fp8_blockwise(q.weight, q.weight_scale, DType::F32).to_float_vector();
  const std::vector<float> d16 = ops::dequantize_fp8_blockwise(q.weight, q.weight_scale, DType::BF16).to_float_vector();
  const std::vector<float> orig = w.to_float_vector();
  for (int64_t i = 0; i < 200; ++i)
    for (int64_t j = 0; j < 300; ++j) {
      const size_t at = static_cast<size_t>(i * 300 + j);
      const float want = qv[at] * s[static_cast<size_t>((i / 128) * 3 + j / 128)];
      ASSERT_EQ(d32[at], want);
      ASSERT_EQ(d16[at], round_bf16(want));
      // e4m3 keeps 3 mantissa bits: within 1/16 of the value, or a subnormal step of the tile.
      ASSERT_NEAR(d32[at], orig[at], std::fabs(orig[at]) / 16 + 2.0f / 448 / 64);
    }
}

TEST(QuantizeFp8PerGroup, GroupsOf128PerTokenWithSaturationAndZeroGroups) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v(static_cast<size_t>(3 * 130), 0.0f);
  // Row 0: group 0 amax 2 (m = 224), group 1 (2 values) amax 0.5 (m = 896).
  v[0] = 2.0f;
  v[1] = -1.0f;
  v[2] = 0.25f;
  v[128] = 0.5f;
  v[129] = -0.125f;
  // Row 1: all zeros. Row 2: inf beside a finite amax 4, and a NaN.
  v[260] = inf;
  v[261] = 4.0f;
  v[262] = nan;
  v[263] = -1.0f;
  const ops::Fp8PerGroup q = ops::quantize_fp8_per_group(Tensor::from_vector(v, {3, 130}));
  ASSERT_EQ(q.group_scale.shape(), Shape({3, 2}));
  const std::vector<float> s = q.group_scale.to_float_vector();
  EXPECT_EQ(s, (std::vector<float>{1.0f / 224.0f, 1.0f / 896.0f, 1.0f, 1.0f, 1.0f / 112.0f, 1.0f}));
  const std::vector<float> qv = e4m3_values(q.q);
  EXPECT_EQ(qv[0], 448.0f);
  EXPECT_EQ(qv[1], -224.0f);
  EXPECT_EQ(qv[2], 56.0f);
  EXPECT_EQ(qv[128], 448.0f);
  EXPECT_EQ(qv[129], -112.0f);
  for (int64_t j = 130; j < 260; ++j) EXPECT_EQ(qv[static_cast<size_t>(j)], 0.0f);
  EXPECT_EQ(qv[260], 448.0f);  // inf saturates
  EXPECT_EQ(qv[261], 448.0f);
  EXPECT_TRUE(std::isnan(qv[262]));
  EXPECT_EQ(qv[263], -112.0f);
}

TEST(QuantizeFp8PerGroup, Bf16InputIsNotRoundedAfterTheScale) {
  // 1.0078125 (bf16) * 448 / 1.0078125... pick x = {3, 1.0078125}: m = 448 / 3 (f32), and
  // 1.0078125 * m = 150.5... which e4m3 rounds to 144 or 160 by the f32 product, not a bf16 one.
  const Tensor x = Tensor::from_vector<float>({3.0f, 1.0078125f}, {1, 2});
  const float m = 448.0f / 3.0f;
  const std::vector<float> q32 = e4m3_values(ops::quantize_fp8_per_group(x).q);
  const std::vector<float> q16 = e4m3_values(ops::quantize_fp8_per_group(x.to(DType::BF16)).q);
  EXPECT_EQ(q32, q16);
  EXPECT_EQ(q32[1], dtype_bits::f8e4m3fn_to_f32(dtype_bits::f32_to_f8e4m3fn(1.0078125f * m)));
}

// The rule of ops::linear_fp8_blockwise evaluated directly in double from the quantised
// operands: sum_g sx[r, g] * sw[o / 128, g] * sum_{i in g} qx[r, i] * qw[o, i], plus the bias.
std::vector<double> blockwise_product(const Tensor& x, const Tensor& w, const std::vector<float>& bias) {
  const int64_t rows = x.size(0), k = x.size(1), n = w.size(0), kb = ops::fp8_blocks(k);
  const ops::Fp8PerGroup qx = ops::quantize_fp8_per_group(x);
  const ops::Fp8Blockwise qw = ops::quantize_fp8_blockwise(w);
  const std::vector<float> a = e4m3_values(qx.q), b = e4m3_values(qw.weight);
  const std::vector<float> sa = qx.group_scale.to_float_vector(), sb = qw.weight_scale.to_float_vector();
  std::vector<double> y(static_cast<size_t>(rows * n), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < n; ++o) {
      double acc = 0;
      for (int64_t g = 0; g < kb; ++g) {
        double p = 0;
        for (int64_t i = g * 128; i < std::min(k, g * 128 + 128); ++i)
          p += static_cast<double>(a[static_cast<size_t>(r * k + i)]) * b[static_cast<size_t>(o * k + i)];
        acc += static_cast<double>(sa[static_cast<size_t>(r * kb + g)] * sb[static_cast<size_t>((o / 128) * kb + g)]) * p;
      }
      y[static_cast<size_t>(r * n + o)] = acc + (bias.empty() ? 0.0 : bias[static_cast<size_t>(o)]);
    }
  return y;
}

TEST(LinearFp8Blockwise, ScalesEachGroupTileProductAndAddsTheBiasInF32) {
  const Tensor x = random_tensor({5, 300}, 11, -3.f, 3.f);
  const Tensor w = random_tensor({140, 300}, 12, -0.2f, 0.2f);
  const Tensor bias = random_tensor({140}, 13);
  const ops::Fp8Blockwise qw = ops::quantize_fp8_blockwise(w);
  const std::vector<float> y = ops::linear_fp8_blockwise(x, qw.weight, qw.weight_scale, bias).to_float_vector();
  const std::vector<double> want = blockwise_product(x, w, bias.to_float_vector());
  const std::vector<float> dense = ops::linear(x, w, bias).to_float_vector();
  double err = 0, norm = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    // The f32 sums differ from the double ones by a few ulps of the partial sums.
    ASSERT_NEAR(y[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << i;
    err += (y[i] - dense[i]) * (y[i] - dense[i]);
    norm += dense[i] * dense[i];
  }
  // And it approximates the dense product as e4m3 operands do (about 2^-5 per operand).
  EXPECT_LT(std::sqrt(err / norm), 0.05);
  EXPECT_GT(std::sqrt(err / norm), 1e-4);  // it did quantise
}

TEST(LinearFp8Blockwise, Bf16OutputRoundsOnceAfterTheBias) {
  const Tensor x = random_tensor({3, 256}, 21, -1.f, 1.f);
  const Tensor w = random_tensor({128, 256}, 22, -1.f, 1.f);
  const Tensor bias = random_tensor({128}, 23).to(DType::BF16);
  const ops::Fp8Blockwise qw = ops::quantize_fp8_blockwise(w);
  const Tensor y16 = ops::linear_fp8_blockwise(x.to(DType::BF16), qw.weight, qw.weight_scale, bias);
  EXPECT_EQ(y16.dtype(), DType::BF16);
  const std::vector<float> y32 =
      ops::linear_fp8_blockwise(x, qw.weight, qw.weight_scale, bias.to(DType::F32)).to_float_vector();
  const std::vector<float> y = y16.to_float_vector();
  // x holds values that bf16 changes, so compare with the f32 run on the bf16-rounded x.
  const std::vector<float> y32r =
      ops::linear_fp8_blockwise(x.to(DType::BF16).to(DType::F32), qw.weight, qw.weight_scale,
                                bias.to(DType::F32)).to_float_vector();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], round_bf16(y32r[i])) << i;
  EXPECT_EQ(y32.size(), y.size());
}

TEST(LinearFp8Blockwise, AnyLeadingShapeAndStridesAndShapeErrors) {
  const Tensor x = random_tensor({2, 3, 256}, 31);
  const ops::Fp8Blockwise qw = ops::quantize_fp8_blockwise(random_tensor({64, 256}, 32));
  const Tensor y = ops::linear_fp8_blockwise(x, qw.weight, qw.weight_scale);
  EXPECT_EQ(y.shape(), Shape({2, 3, 64}));
  EXPECT_EQ(ops::linear_fp8_blockwise(non_contiguous_copy(x), qw.weight, qw.weight_scale).to_float_vector(),
            y.to_float_vector());
  const std::string bad_scale = error_of([&] {
    (void)ops::linear_fp8_blockwise(x, qw.weight, Tensor::full({1, 1}, 1.0, DType::F32));
  });
  EXPECT_NE(bad_scale.find("weight_scale must be f32 [1, 2]"), std::string::npos) << bad_scale;
  const std::string bad_x = error_of([&] {
    (void)ops::linear_fp8_blockwise(random_tensor({2, 128}, 1), qw.weight, qw.weight_scale);
  });
  EXPECT_NE(bad_x.find("expects 256 input features"), std::string::npos) << bad_x;
}

TEST(FuseDeltaFp8Blockwise, AddsTheDeltaToTheBf16DequantisationAndQuantisesAgain) {
  const ops::Fp8Blockwise qw = ops::quantize_fp8_blockwise(random_tensor({130, 256}, 41));
  const Tensor delta = random_tensor({130, 256}, 42, -0.01f, 0.01f);
  const ops::Fp8Blockwise fused = ops::fuse_delta_fp8_blockwise(qw.weight, qw.weight_scale, delta);
  const std::vector<float> d = ops::dequantize_fp8_blockwise(qw.weight, qw.weight_scale, DType::BF16).to_float_vector();
  const std::vector<float> dl = delta.to_float_vector();
  std::vector<float> merged(d.size());
  for (size_t i = 0; i < d.size(); ++i) merged[i] = round_bf16(d[i] + round_bf16(dl[i]));
  const ops::Fp8Blockwise want = ops::quantize_fp8_blockwise(Tensor::from_vector(merged, {130, 256}));
  EXPECT_EQ(e4m3_values(fused.weight), e4m3_values(want.weight));
  EXPECT_EQ(fused.weight_scale.to_float_vector(), want.weight_scale.to_float_vector());
}

}  // namespace
}  // namespace ltx::blockwise_fp8_test
