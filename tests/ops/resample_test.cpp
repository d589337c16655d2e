#include "ops/resample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace ltx {
namespace {

using ops::InterpMode;
using test::max_abs_diff;
using test::non_contiguous_copy;
using test::random_tensor;
using test::make_ref;
using test::ravel;

// ---------------------------------------------------------------- interpolation reference
// Direct per-element formulas of torch's interpolate (UpSample.h), index math in float as torch
// does for f32, weighted sums in double.

struct Taps {  // per output index along one dim: source indices and weights
  std::vector<std::vector<std::pair<int64_t, double>>> at;
};

// The scale torch uses for source indices (1/scale_factor when one is given, else in/out).
float ref_scale(int64_t in, int64_t out, double sf) {
  return sf > 0 ? static_cast<float>(1.0 / sf) : static_cast<float>(in) / static_cast<float>(out);
}

Taps ref_taps(int64_t in, int64_t out, InterpMode mode, bool align_corners, double sf) {
  Taps t;
  t.at.resize(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    auto& taps = t.at[o];
    switch (mode) {
      case InterpMode::Nearest: {
        int64_t i;
        if (out == in) {
          i = o;
        } else if (out == 2 * in) {
          i = o / 2;
        } else {
          i = std::min<int64_t>(
              static_cast<int64_t>(std::floor(static_cast<float>(o) * ref_scale(in, out, sf))),
              in - 1);
        }
        taps.push_back({i, 1.0});
        break;
      }
      case InterpMode::NearestExact: {
        const float s = ref_scale(in, out, sf);
        taps.push_back(
            {std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>((o + 0.5) * s))),
                               in - 1),
             1.0});
        break;
      }
      case InterpMode::Linear: {
        if (out == in) {
          taps.push_back({o, 1.0});
          break;
        }
        float src;
        if (align_corners) {
          const float s = out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.f;
          src = s * static_cast<float>(o);
        } else {
          src = std::max(0.f, ref_scale(in, out, sf) * (static_cast<float>(o) + 0.5f) - 0.5f);
        }
        const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(src)), in - 1);
        const int64_t i1 = std::min<int64_t>(i0 + 1, in - 1);
        const double l = std::clamp<double>(src - static_cast<float>(i0), 0.0, 1.0);
        taps.push_back({i0, 1.0 - l});
        taps.push_back({i1, l});
        break;
      }
      case InterpMode::Area: {
        const int64_t a = static_cast<int64_t>(std::floor(static_cast<double>(o * in) / out));
        const int64_t b = static_cast<int64_t>(std::ceil(static_cast<double>((o + 1) * in) / out));
        for (int64_t i = a; i < b; ++i) taps.push_back({i, 1.0 / static_cast<double>(b - a)});
        break;
      }
    }
  }
  return t;
}

Tensor interp_ref(const Tensor& x, const std::vector<int64_t>& size, InterpMode mode,
                  bool align_corners, const std::vector<double>& sf = {}) {
  const int R = x.dim() - 2;
  std::vector<Taps> taps;
  Shape out = {x.size(0), x.size(1)};
  for (int i = 0; i < R; ++i) {
    taps.push_back(ref_taps(x.size(2 + i), size[i], mode, align_corners, sf.empty() ? 0 : sf[i]));
    out.push_back(size[i]);
  }
  const auto xv = x.to_double_vector();
  return make_ref(out, [&](const std::vector<int64_t>& o) {
    // Sum over the product of the per-dim taps.
    double acc = 0;
    std::vector<int64_t> src = o;
    std::vector<size_t> k(R, 0);
    for (;;) {
      double w = 1;
      for (int i = 0; i < R; ++i) {
        const auto& tap = taps[i].at[o[2 + i]][k[i]];
        src[2 + i] = tap.first;
        w *= tap.second;
      }
      acc += w * xv[ravel(src, x.shape())];
      int i = R - 1;
      for (; i >= 0; --i) {
        if (++k[i] < taps[i].at[o[2 + i]].size()) break;
        k[i] = 0;
      }
      if (i < 0) break;
    }
    return acc;
  });
}

struct InterpCase {
  Shape in;
  std::vector<int64_t> out;
};

const std::vector<InterpCase>& interp_cases() {
  static const std::vector<InterpCase> cases = {
      {{2, 3, 5}, {7}},
      {{1, 2, 7}, {5}},
      {{1, 2, 4}, {8}},
      {{1, 1, 1}, {3}},
      {{1, 2, 5}, {1}},
      {{2, 3, 5, 7}, {9, 4}},
      {{1, 2, 3, 3}, {6, 6}},
      {{1, 1, 9, 1}, {2, 5}},
      {{1, 2, 3, 5, 4}, {5, 7, 9}},
      {{1, 1, 2, 3, 5}, {1, 6, 2}},
      {{1, 2, 5, 5}, {5, 5}},
  };
  return cases;
}

void expect_interp_matches(InterpMode mode, bool align_corners, double tol) {
  uint64_t seed = 1;
  for (const InterpCase& c : interp_cases()) {
    const Tensor x = random_tensor(c.in, seed++);
    const Tensor ref = interp_ref(x, c.out, mode, align_corners);
    for (const Tensor& in : {x, non_contiguous_copy(x)}) {
      const Tensor y = ops::interpolate(in, c.out, mode, align_corners);
      ASSERT_EQ(y.shape(), ref.shape()) << c.in.str();
      EXPECT_LE(max_abs_diff(y, ref), tol) << c.in.str() << " -> " << Dims(c.out).str();
    }
  }
}

TEST(Interpolate, NearestMatchesReference) { expect_interp_matches(InterpMode::Nearest, false, 0); }
TEST(Interpolate, NearestExactMatchesReference) {
  expect_interp_matches(InterpMode::NearestExact, false, 0);
}
TEST(Interpolate, LinearMatchesReference) {
  expect_interp_matches(InterpMode::Linear, false, 1e-6);
}
TEST(Interpolate, LinearAlignCornersMatchesReference) {
  expect_interp_matches(InterpMode::Linear, true, 1e-6);
}
TEST(Interpolate, AreaMatchesReference) { expect_interp_matches(InterpMode::Area, false, 1e-6); }

TEST(Interpolate, KnownTorchValues) {
  const Tensor x = Tensor::from_vector<float>({0, 1}, {1, 1, 2});
  EXPECT_EQ(ops::interpolate(x, {4}, InterpMode::Linear).to_double_vector(),
            (std::vector<double>{0, 0.25, 0.75, 1}));
  EXPECT_EQ(ops::interpolate(x, {3}, InterpMode::Linear, true).to_double_vector(),
            (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(ops::interpolate(x, {4}, InterpMode::Nearest).to_double_vector(),
            (std::vector<double>{0, 0, 1, 1}));
  const Tensor r = Tensor::from_vector<float>({0, 1, 2, 3}, {1, 1, 4});
  // scale_factor 1.7 maps with 1/1.7, size 6 maps with 4/6: torch gives different indices.
  EXPECT_EQ(ops::interpolate_scale(r, {1.7}, InterpMode::Nearest).to_double_vector(),
            (std::vector<double>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(ops::interpolate(r, {6}, InterpMode::Nearest).to_double_vector(),
            (std::vector<double>{0, 0, 1, 2, 2, 3}));
  EXPECT_EQ(ops::interpolate(r, {2}, InterpMode::Area).to_double_vector(),
            (std::vector<double>{0.5, 2.5}));
  // When floor(in * factor) == in torch copies through for nearest and linear, ignoring 1/factor.
  EXPECT_EQ(ops::interpolate_scale(r, {1.2}, InterpMode::Nearest).to_double_vector(),
            (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(ops::interpolate_scale(r, {1.2}, InterpMode::Linear).to_double_vector(),
            (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(ops::interpolate_scale(r, {1.2}, InterpMode::NearestExact).to_double_vector(),
            (std::vector<double>{0, 1, 2, 2}));
}

TEST(Interpolate, ScaleFactorUsesTorchRules) {
  // Audio VAE Upsample: scale_factor 2.0, nearest, on [B, C, T, F].
  const Tensor a = random_tensor({1, 3, 5, 4}, 21);
  const Tensor up = ops::interpolate_scale(non_contiguous_copy(a), {2.0}, InterpMode::Nearest);
  ASSERT_EQ(up.shape(), (Shape{1, 3, 10, 8}));
  EXPECT_EQ(max_abs_diff(up, interp_ref(a, {10, 8}, InterpMode::Nearest, false, {2.0, 2.0})), 0.0);

  const Tensor x = random_tensor({1, 2, 5, 6}, 22);
  for (InterpMode mode : {InterpMode::Nearest, InterpMode::NearestExact, InterpMode::Linear}) {
    const std::vector<double> sf = {1.3, 0.7};
    const Tensor y = ops::interpolate_scale(x, sf, mode);
    ASSERT_EQ(y.shape(), (Shape{1, 2, 6, 4}));
    const Tensor ref = interp_ref(x, {6, 4}, mode, false, sf);
    EXPECT_LE(max_abs_diff(y, ref), 1e-6) << static_cast<int>(mode);
    // The size-given rule would pick other sources here; make sure the test can tell.
    EXPECT_GT(max_abs_diff(ref, interp_ref(x, {6, 4}, mode, false)), 1e-3);
  }
  // align_corners ignores the factor; area only uses it for the output size.
  EXPECT_LE(max_abs_diff(ops::interpolate_scale(x, {1.3}, InterpMode::Linear, true),
                         interp_ref(x, {6, 7}, InterpMode::Linear, true)),
            1e-6);
  EXPECT_LE(max_abs_diff(ops::interpolate_scale(x, {0.5}, InterpMode::Area),
                         interp_ref(x, {2, 3}, InterpMode::Area, false)),
            1e-6);
}

TEST(Interpolate, RejectsBadArguments) {
  const Tensor x = random_tensor({1, 2, 4, 4}, 1);
  EXPECT_ERROR_HAS(ops::interpolate(x, {8, 8}, InterpMode::Nearest, true), "align_corners");
  EXPECT_ERROR_HAS(ops::interpolate(x, {8, 8, 8}, InterpMode::Linear), "3 sizes/factors for 2");
  EXPECT_ERROR_HAS(ops::interpolate(x, {0, 8}, InterpMode::Linear), "positive");
  EXPECT_ERROR_HAS(ops::interpolate(random_tensor({4, 4}, 2), {8}, InterpMode::Linear),
                   "[N, C, *spatial]");
  EXPECT_ERROR_HAS(ops::interpolate(x.to(DType::F16), {8, 8}, InterpMode::Linear), "f32");
  EXPECT_ERROR_HAS(ops::interpolate_scale(x, {-1.0}, InterpMode::Linear), "positive");
  EXPECT_ERROR_HAS(ops::interpolate_scale(x, {0.1}, InterpMode::Linear), "positive");
}

// ---------------------------------------------------------------- channel <-> space

TEST(PixelShuffle, MatchesTorchFormula) {
  for (const Shape& s : {Shape{2, 12, 3, 5}, Shape{12, 1, 1}, Shape{2, 2, 18, 2, 3}}) {
    const int64_t r = s[s.size() - 3] == 18 ? 3 : 2;
    const Tensor x = random_tensor(s, 30);
    const Tensor y = ops::pixel_shuffle(non_contiguous_copy(x), r);
    Shape out = s;
    const int n = s.size();
    out[n - 3] /= r * r;
    out[n - 2] *= r;
    out[n - 1] *= r;
    const auto xv = x.to_double_vector();
    const Tensor ref = make_ref(out, [&](std::vector<int64_t> o) {
      const int64_t c = o[n - 3], h = o[n - 2], w = o[n - 1];
      o[n - 3] = c * r * r + (h % r) * r + (w % r);
      o[n - 2] = h / r;
      o[n - 1] = w / r;
      return xv[ravel(o, s)];
    });
    ASSERT_EQ(y.shape(), out);
    EXPECT_EQ(max_abs_diff(y, ref), 0.0) << s.str();
    const Tensor back = ops::pixel_unshuffle(non_contiguous_copy(y), r);
    ASSERT_EQ(back.shape(), s);
    EXPECT_EQ(max_abs_diff(back, x), 0.0);
  }
  EXPECT_ERROR_HAS(ops::pixel_shuffle(random_tensor({1, 6, 2, 2}, 1), 2), "divisible by r * r");
  EXPECT_ERROR_HAS(ops::pixel_unshuffle(random_tensor({1, 1, 3, 4}, 1), 2), "not divisible by 2");
}

// Reference for depth_to_space written from the einops pattern
// "b (c s_order...) spatial... -> b c (S_i s_i)...": channel digits in channel_order.
Tensor depth_to_space_ref(const Tensor& x, const std::vector<int64_t>& f,
                          const std::vector<int64_t>& order) {
  const int R = static_cast<int>(f.size());
  int64_t F = 1;
  for (int64_t v : f) F *= v;
  Shape out = {x.size(0), x.size(1) / F};
  for (int i = 0; i < R; ++i) out.push_back(x.size(2 + i) * f[i]);
  const auto xv = x.to_double_vector();
  return make_ref(out, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> src = {o[0], 0};
    int64_t ch = o[1];
    for (int j = 0; j < R; ++j) ch = ch * f[order[j]] + o[2 + order[j]] % f[order[j]];
    src[1] = ch;
    for (int i = 0; i < R; ++i) src.push_back(o[2 + i] / f[i]);
    return xv[ravel(src, x.shape())];
  });
}

TEST(DepthToSpace, MatchesEinopsPatternsUsedByTheReference) {
  struct Case {
    Shape in;
    std::vector<int64_t> factors, order;
  };
  const std::vector<Case> cases = {
      {{2, 24, 2, 3, 2}, {2, 3, 2}, {0, 1, 2}},  // DepthToSpaceUpsample / PixelShuffleND(3)
      {{1, 48, 3, 2, 2}, {1, 4, 4}, {0, 2, 1}},  // unpatchify (patch_size_t 1)
      {{1, 16, 2, 1, 3}, {2, 2, 2}, {0, 2, 1}},  // unpatchify with temporal patching
      {{2, 12, 3, 2}, {2, 3}, {1, 0}},           // 2-D unpatchify
      {{1, 6, 3, 2, 2}, {2, 1, 1}, {}},          // PixelShuffleND(1)
      {{1, 8, 1, 1, 1}, {2, 2, 2}, {}},
  };
  for (const Case& c : cases) {
    std::vector<int64_t> order = c.order;
    if (order.empty())
      for (size_t i = 0; i < c.factors.size(); ++i) order.push_back(static_cast<int64_t>(i));
    const Tensor x = random_tensor(c.in, 40);
    const Tensor y = ops::depth_to_space(non_contiguous_copy(x), c.factors, c.order);
    const Tensor ref = depth_to_space_ref(x, c.factors, order);
    ASSERT_EQ(y.shape(), ref.shape()) << c.in.str();
    EXPECT_TRUE(y.is_contiguous());
    EXPECT_EQ(max_abs_diff(y, ref), 0.0) << c.in.str() << " order " << Dims(order).str();
    const Tensor back = ops::space_to_depth(non_contiguous_copy(y), c.factors, c.order);
    ASSERT_EQ(back.shape(), c.in);
    EXPECT_EQ(max_abs_diff(back, x), 0.0) << c.in.str();
  }
}

// Subpositions::Outer reads channel sub * C + c where Inner reads c * F + sub: a tensor whose
// channels were permuted by permute_depth_channels gives exactly the Inner result of the original.
TEST(DepthToSpace, OuterSubpositionsReadPermutedChannels) {
  struct Case {
    Shape in;
    std::vector<int64_t> factors, order;
  };
  const std::vector<Case> cases = {
      {{1, 24, 2, 3, 2}, {2, 3, 2}, {0, 1, 2}},
      {{1, 48, 3, 2, 2}, {1, 4, 4}, {0, 2, 1}},
      {{1, 6, 3, 2, 2}, {2, 1, 1}, {}},
      {{1, 12, 3, 2}, {2, 3}, {1, 0}},
  };
  for (const Case& c : cases) {
    int64_t F = 1;
    for (int64_t f : c.factors) F *= f;
    const Tensor x = random_tensor(c.in, 41);
    Shape rows = c.in;
    rows.erase(0);  // [C * F, *spatial]: the channel rows first, as a conv weight's
    const Tensor permuted = ops::permute_depth_channels(x.view(rows), F).view(c.in);
    EXPECT_NE(max_abs_diff(permuted, x), 0.0) << c.in.str();
    const Tensor want = ops::depth_to_space(x, c.factors, c.order);
    const Tensor got = ops::depth_to_space(non_contiguous_copy(permuted), c.factors, c.order,
                                           ops::Subpositions::Outer);
    ASSERT_EQ(got.shape(), want.shape()) << c.in.str();
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_EQ(max_abs_diff(got, want), 0.0) << c.in.str();
  }
  // The permutation itself: row c * F + sub moves to sub * C + c, of a weight or a bias.
  const Tensor bias = Tensor::arange(6, DType::I64);
  EXPECT_EQ(ops::permute_depth_channels(bias, 2).to_int_vector(),
            (std::vector<int64_t>{0, 2, 4, 1, 3, 5}));
  EXPECT_ERROR_HAS(ops::permute_depth_channels(bias, 4), "no [C * 4, ...] channel rows");
}

TEST(DepthToSpace, MovesAnyDtypeAndAlwaysCopies) {
  const Tensor x = Tensor::arange(16, DType::I64).reshape({1, 8, 2});
  const Tensor y = ops::depth_to_space(x, {2});
  EXPECT_EQ(y.dtype(), DType::I64);
  EXPECT_EQ(y.to_int_vector(),
            (std::vector<int64_t>{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}));
  const Tensor same = ops::depth_to_space(x, {1});
  EXPECT_NE(same.raw_data(), x.raw_data());
}

TEST(DepthToSpace, RejectsBadArguments) {
  const Tensor x = random_tensor({1, 12, 2, 2, 2}, 1);
  EXPECT_ERROR_HAS(ops::depth_to_space(x, {2, 2, 2}), "not divisible by the product 8");
  EXPECT_ERROR_HAS(ops::depth_to_space(x, {1, 2, 2}, {0, 0, 1}), "not a permutation");
  EXPECT_ERROR_HAS(ops::depth_to_space(x, {2, 2}), "with 2 spatial dims");
  EXPECT_ERROR_HAS(ops::depth_to_space(x, {0, 1, 1}), ">= 1");
  EXPECT_ERROR_HAS(ops::space_to_depth(x, {1, 1, 3}), "not divisible by its factor 3");
}

}  // namespace
}  // namespace ltx
