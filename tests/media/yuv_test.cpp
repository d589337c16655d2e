// rgb_to_yuv420_bt709 / rgb_to_uint8 against double-precision references of the reference's
// formulas (ltx_core/color/yuv.py).
#include "media/yuv.h"

#include <gtest/gtest.h>

#include <cmath>

#include "media_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

// The f32 matrix constants, as doubles.
const double kM[3][3] = {
    {0.2126f, 0.7152f, 0.0722f}, {-0.1146f, -0.3854f, 0.5f}, {0.5f, -0.4542f, -0.0458f}};

double dot(const std::vector<double>& px, int64_t i, int row) {
  return px[3 * i] * kM[row][0] + px[3 * i + 1] * kM[row][1] + px[3 * i + 2] * kM[row][2];
}

// Unrounded code values (before clamp + truncation) for one frame [H, W, 3].
struct RefPlanes {
  std::vector<double> y, u, v;
};
RefPlanes reference(const std::vector<double>& px, int64_t H, int64_t W) {
  RefPlanes r;
  for (int64_t i = 0; i < H * W; ++i) r.y.push_back(dot(px, i, 0) * 219 + 16);
  for (int64_t h = 0; h < H / 2; ++h)
    for (int64_t w = 0; w < W / 2; ++w)
      for (int c = 1; c <= 2; ++c) {
        const int64_t i00 = (2 * h) * W + 2 * w, i10 = i00 + W;
        const double avg =
            (dot(px, i00, c) + dot(px, i00 + 1, c) + dot(px, i10, c) + dot(px, i10 + 1, c)) / 4;
        (c == 1 ? r.u : r.v).push_back(avg * 224 + 128);
      }
  return r;
}

uint8_t ref_code(double x) { return static_cast<uint8_t>(std::floor(std::clamp(x, 0.0, 255.0))); }

// Codes equal the double reference's except where the reference lies within `margin` of an
// integer (there f32 rounding may legitimately fall on the other side of the truncation).
void expect_codes(const Tensor& got, const std::vector<double>& ref, double margin,
                  const char* plane) {
  const auto g = got.to_double_vector();
  ASSERT_EQ(g.size(), ref.size()) << plane;
  int64_t skipped = 0, bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double frac = ref[i] - std::floor(ref[i]);
    if (ref[i] > 0 && ref[i] < 255 && (frac < margin || frac > 1 - margin)) {
      ++skipped;
      EXPECT_LE(std::fabs(g[i] - ref_code(ref[i])), 1) << plane << " " << i;
      continue;
    }
    if (g[i] != ref_code(ref[i]) && bad++ < 5)
      ADD_FAILURE() << plane << "[" << i << "] = " << g[i] << ", reference " << ref[i];
  }
  EXPECT_EQ(bad, 0) << plane;
  EXPECT_LT(skipped, static_cast<int64_t>(g.size()) / 50 + 1) << plane;
}

TEST(Yuv, MatchesDoubleReferenceWithClampingAndTruncation) {
  // Values slightly outside [0, 1] exercise the clamp; odd frame count, non-square sizes.
  const int64_t F = 3, H = 6, W = 10;
  const Tensor frames = test::random_tensor({F, H, W, 3}, 7, -0.05f, 1.05f);
  const media::Yuv420Frames yuv = media::rgb_to_yuv420_bt709(frames);
  ASSERT_EQ(yuv.y.shape(), (Shape{F, H, W}));
  ASSERT_EQ(yuv.u.shape(), (Shape{F, H / 2, W / 2}));
  ASSERT_EQ(yuv.v.dtype(), DType::U8);
  for (int64_t f = 0; f < F; ++f) {
    const RefPlanes ref = reference(frames.select(0, f).to_double_vector(), H, W);
    expect_codes(yuv.y.select(0, f), ref.y, 1e-3, "Y");
    expect_codes(yuv.u.select(0, f), ref.u, 1e-3, "U");
    expect_codes(yuv.v.select(0, f), ref.v, 1e-3, "V");
  }
}

TEST(Yuv, KnownColours) {
  // Black and a mid gray are exact in f32; pure white lands on 0.99999994 * 219 + 16 and truncates
  // to 234 exactly as the reference's f32 arithmetic does.
  Tensor frames = Tensor::zeros({3, 2, 2, 3});
  frames.select(0, 1).fill(0.5);
  frames.select(0, 2).fill(1.0);
  const media::Yuv420Frames yuv = media::rgb_to_yuv420_bt709(frames);
  EXPECT_EQ(yuv.y.select(0, 0).to_int_vector(), (std::vector<int64_t>{16, 16, 16, 16}));
  EXPECT_EQ(yuv.u.select(0, 0).item(), 128);
  EXPECT_EQ(yuv.v.select(0, 0).item(), 128);
  const float white = 0.2126f * 1.f + 0.7152f * 1.f + 0.0722f * 1.f;
  const int expect_white = static_cast<int>(white * 219.f + 16.f);
  EXPECT_EQ(yuv.y.select(0, 2).to_int_vector()[0], expect_white);
  EXPECT_TRUE(expect_white == 234 || expect_white == 235);
  EXPECT_EQ(yuv.y.select(0, 1).to_int_vector()[0],
            static_cast<int>((0.2126f * 0.5f + 0.7152f * 0.5f + 0.0722f * 0.5f) * 219.f + 16.f));
}

TEST(Yuv, StridedInputAndF64MatchContiguousF32) {
  const Tensor frames = test::random_tensor({2, 4, 8, 3}, 11, 0.f, 1.f);
  const media::Yuv420Frames a = media::rgb_to_yuv420_bt709(frames);
  const media::Yuv420Frames b = media::rgb_to_yuv420_bt709(test::non_contiguous_copy(frames));
  EXPECT_EQ(test::max_abs_diff(a.y, b.y), 0);
  EXPECT_EQ(test::max_abs_diff(a.u, b.u), 0);
  EXPECT_EQ(test::max_abs_diff(a.v, b.v), 0);
  // f64 frames are computed in f64: exactly the double reference.
  const Tensor f64 = frames.to(DType::F64);
  const media::Yuv420Frames d = media::rgb_to_yuv420_bt709(f64.select(0, 1));
  const RefPlanes ref = reference(f64.select(0, 1).to_double_vector(), 4, 8);
  const auto y = d.y.to_double_vector();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], ref_code(ref.y[i])) << i;
}

TEST(Yuv, Bf16FramesRoundEveryIntermediateLikeTorch) {
  // An independent emulation with tensor dtype conversions: every torch op on bf16 rounds.
  const Tensor frames = test::random_tensor({1, 4, 6, 3}, 5, 0.f, 1.f).to(DType::BF16);
  const media::Yuv420Frames got = media::rgb_to_yuv420_bt709(frames);
  auto bf = [](double x) { return Tensor::full({1}, x).to(DType::BF16).item(); };
  const auto px = frames.to_double_vector();
  double m[3][3];
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) m[r][c] = bf(kM[r][c]);
  auto dotb = [&](int64_t i, int r) {
    const float acc = static_cast<float>(px[3 * i] * m[r][0]) +
                      static_cast<float>(px[3 * i + 1] * m[r][1]) +
                      static_cast<float>(px[3 * i + 2] * m[r][2]);
    return bf(acc);
  };
  auto code = [](double x) { return static_cast<int64_t>(std::clamp(x, 0.0, 255.0)); };
  const auto y = got.y.to_int_vector();
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(y[i], code(bf(bf(dotb(i, 0) * 219) + 16))) << i;
  const auto u = got.u.to_int_vector(), v = got.v.to_int_vector();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t w = 0; w < 3; ++w) {
      const int64_t i00 = 2 * h * 6 + 2 * w, i10 = i00 + 6;
      for (int c = 1; c <= 2; ++c) {
        const float sum = static_cast<float>(dotb(i00, c)) + static_cast<float>(dotb(i00 + 1, c)) +
                          static_cast<float>(dotb(i10, c)) + static_cast<float>(dotb(i10 + 1, c));
        const double avg = bf(sum / 4.f);
        EXPECT_EQ((c == 1 ? u : v)[h * 3 + w], code(bf(bf(avg * 224) + 128))) << h << "," << w;
      }
    }
  // And the result stays within a few codes of the f32 conversion.
  const media::Yuv420Frames f32 = media::rgb_to_yuv420_bt709(frames.to(DType::F32));
  EXPECT_LE(test::max_abs_diff(got.y, f32.y), 3);
}

TEST(Yuv, RejectsOddSizesAndNonFloat) {
  test::expect_error_containing(
      [] {
        media::rgb_to_yuv420_bt709(Tensor::zeros({1, 3, 4, 3}));
      },
      {"even", "3x4"});
  test::expect_error_containing(
      [] {
        media::rgb_to_yuv420_bt709(Tensor::zeros({1, 4, 4, 3}, DType::U8));
      },
      {"floating"});
  test::expect_error_containing(
      [] {
        media::rgb_to_yuv420_bt709(Tensor::zeros({1, 4, 4, 4}));
      },
      {"3 channels"});
}

TEST(Yuv, RgbToUint8ClampsScalesAndTruncates) {
  const std::vector<float> v = {-0.5f, 0.f, 0.5f, 1.f, 2.f, 0.999f, 0.0039f, 0.00393f, NAN};
  const Tensor t = Tensor::from_vector(v, {3, 3});
  const auto got = media::rgb_to_uint8(t).to_int_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t expect =
        std::isnan(v[i]) ? 0 : static_cast<int64_t>(std::clamp(v[i], 0.f, 1.f) * 255.f);
    EXPECT_EQ(got[i], expect) << v[i];
  }
  EXPECT_EQ(got[2], 127);
  EXPECT_EQ(got[3], 255);
}

}  // namespace
}  // namespace ltx
