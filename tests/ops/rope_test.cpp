#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"  // same_bytes (device-independent)
#include "ops/rope.h"
#include "support/rope3d_test_util.h"
#include "support/test_support.h"

namespace ltx::rope_test {
namespace {

using ops::RopeLayout;
using test::non_contiguous_copy;
using test::random_tensor;

// Double-precision rotation; cos/sin broadcast to x's leading dims.
Tensor ref_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, RopeLayout layout) {
  const int64_t d = x.size(-1);
  Shape target = x.shape();
  target[target.size() - 1] = layout == RopeLayout::Split ? d / 2 : d;
  const auto vx = x.to_double_vector();
  const auto vc = cos.expand(target).to_double_vector(), vs = sin.expand(target).to_double_vector();
  std::vector<double> y(vx.size());
  const size_t n = static_cast<size_t>(d), w = static_cast<size_t>(target[target.size() - 1]);
  for (size_t r = 0; r < vx.size() / n; ++r) {
    const double* xr = &vx[r * n];
    const double* c = &vc[r * w];
    const double* s = &vs[r * w];
    double* yr = &y[r * n];
    if (layout == RopeLayout::Split) {
      for (size_t i = 0; i < n / 2; ++i) {
        yr[i] = xr[i] * c[i] - xr[i + n / 2] * s[i];
        yr[i + n / 2] = xr[i + n / 2] * c[i] + xr[i] * s[i];
      }
    } else {
      for (size_t i = 0; i < n; i += 2) {
        yr[i] = xr[i] * c[i] - xr[i + 1] * s[i];
        yr[i + 1] = xr[i + 1] * c[i + 1] + xr[i] * s[i + 1];
      }
    }
  }
  return Tensor::from_vector(y, x.shape());
}

constexpr double kTol = 1e-6;

TEST(Rope, SplitMatchesDoubleReferenceWithBroadcastCosSin) {
  const int64_t B = 2, H = 3, T = 7, Dh = 16;
  const Tensor x = random_tensor({B, H, T, Dh}, 1);
  const std::vector<Shape> cs_shapes = {{B, H, T, Dh / 2}, {B, 1, T, Dh / 2}, {1, H, T, Dh / 2},
                                        {T, Dh / 2},       {Dh / 2},          {1, 1, 1, Dh / 2}};
  uint64_t seed = 10;
  for (const Shape& s : cs_shapes) {
    const Tensor c = random_tensor(s, seed++), sn = random_tensor(s, seed++);
    const Tensor y = ops::apply_rope(x, c, sn, RopeLayout::Split);
    EXPECT_EQ(y.shape(), x.shape());
    EXPECT_TRUE(y.is_contiguous());
    SCOPED_TRACE(s.str());
    EXPECT_ALLCLOSE(y, ref_rope(x, c, sn, RopeLayout::Split), kTol);
  }
}

TEST(Rope, InterleavedMatchesDoubleReferenceWithBroadcastCosSin) {
  const int64_t B = 2, T = 33, D = 24;
  const Tensor x = random_tensor({B, T, D}, 2);
  // Arbitrary per-element cos/sin (not repeated pairs) so that index mix-ups show.
  const std::vector<Shape> cs_shapes = {{B, T, D}, {1, T, D}, {T, D}};
  uint64_t seed = 20;
  for (const Shape& s : cs_shapes) {
    const Tensor c = random_tensor(s, seed++), sn = random_tensor(s, seed++);
    SCOPED_TRACE(s.str());
    EXPECT_ALLCLOSE(ops::apply_rope(x, c, sn, RopeLayout::Interleaved),
                    ref_rope(x, c, sn, RopeLayout::Interleaved), kTol);
  }
}

TEST(Rope, RotatesByTheAngle) {
  // Unit vectors rotated by 90 degrees: (1, 0) -> (0, 1) in both layouts.
  const Tensor c = Tensor::zeros({1}), s = Tensor::full({1}, 1.0);
  const Tensor y = ops::apply_rope(Tensor::from_vector<float>({1.f, 0.f}, {2}), c, s, RopeLayout::Split);
  EXPECT_EQ(y.to_float_vector(), std::vector<float>({0.f, 1.f}));
  const Tensor c2 = Tensor::zeros({2}), s2 = Tensor::full({2}, 1.0);
  const Tensor y2 =
      ops::apply_rope(Tensor::from_vector<float>({1.f, 0.f}, {2}), c2, s2, RopeLayout::Interleaved);
  EXPECT_EQ(y2.to_float_vector(), std::vector<float>({0.f, 1.f}));
}

TEST(Rope, AcceptsNonContiguousInputs) {
  const int64_t B = 1, T = 7, H = 3, Dh = 32;
  // [B, T, H, Dh] -> [B, H, T, Dh] as the transformer produces, and cos/sin [B, 1, T, Dh/2].
  const Tensor x = random_tensor({B, T, H, Dh}, 3).transpose(1, 2);
  const Tensor c = random_tensor({B, 1, T, Dh / 2}, 4), s = random_tensor({B, 1, T, Dh / 2}, 5);
  const Tensor want = ref_rope(x.contiguous(), c, s, RopeLayout::Split);
  EXPECT_ALLCLOSE(ops::apply_rope(x, c, s, RopeLayout::Split), want, kTol);
  // Non-unit last-dim strides everywhere (generic path).
  EXPECT_ALLCLOSE(ops::apply_rope(non_contiguous_copy(x.contiguous()), non_contiguous_copy(c),
                                  non_contiguous_copy(s), RopeLayout::Split),
                  want, kTol);
  const Tensor ci = random_tensor({T, Dh}, 6), si = random_tensor({T, Dh}, 7);
  EXPECT_ALLCLOSE(ops::apply_rope(non_contiguous_copy(x.contiguous()), non_contiguous_copy(ci),
                                  non_contiguous_copy(si), RopeLayout::Interleaved),
                  ref_rope(x.contiguous(), ci, si, RopeLayout::Interleaved), kTol);
}

TEST(Rope, RoundsLikeSeparateFp32ProductsWithoutFma) {
  // Bit-exact against fp32 evaluation of the reference's order: two rounded products, one rounded
  // add/subtract. A fused multiply-add would differ in the last bit for some elements.
  const int64_t T = 129, D = 64;
  const Tensor x = random_tensor({T, D}, 8, -100.f, 100.f);
  const Tensor c = random_tensor({T, D / 2}, 9), s = random_tensor({T, D / 2}, 10);
  const std::vector<float> y = ops::apply_rope(x, c, s, RopeLayout::Split).to_float_vector();
  const std::vector<float> vx = x.to_float_vector(), vc = c.to_float_vector(), vs = s.to_float_vector();
  int mismatches = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D / 2; ++i) {
      volatile float x1 = vx[static_cast<size_t>(t * D + i)], x2 = vx[static_cast<size_t>(t * D + i + D / 2)];
      volatile float ci = vc[static_cast<size_t>(t * D / 2 + i)], si = vs[static_cast<size_t>(t * D / 2 + i)];
      volatile float a1 = x1 * ci, b1 = x2 * si, a2 = x2 * ci, b2 = x1 * si;
      const float y1 = a1 - b1, y2 = a2 + b2;
      mismatches += y[static_cast<size_t>(t * D + i)] != y1;
      mismatches += y[static_cast<size_t>(t * D + i + D / 2)] != y2;
    }
  EXPECT_EQ(mismatches, 0);
}

TEST(Rope, HandlesEmptyInputs) {
  const Tensor y = ops::apply_rope(Tensor::zeros({2, 0, 8}), Tensor::zeros({0, 4}),
                                   Tensor::zeros({0, 4}), RopeLayout::Split);
  EXPECT_EQ(y.shape(), Shape({2, 0, 8}));
}

TEST(Rope, RejectsBadArguments) {
  const Tensor x = random_tensor({2, 3, 5, 8}, 1), c = random_tensor({5, 4}, 2), s = random_tensor({5, 4}, 3);
  EXPECT_NO_THROW(ops::apply_rope(x, c, s, RopeLayout::Split));
  EXPECT_THROW(ops::apply_rope(random_tensor({5, 7}, 4), random_tensor({5, 3}, 5),
                               random_tensor({5, 3}, 6), RopeLayout::Split),
               Error);                                                             // odd D
  EXPECT_THROW(ops::apply_rope(x, c, s, RopeLayout::Interleaved), Error);          // needs [..., D]
  EXPECT_THROW(ops::apply_rope(x, random_tensor({5, 8}, 4), random_tensor({5, 8}, 5),
                               RopeLayout::Split),
               Error);                                                             // needs [..., D/2]
  EXPECT_THROW(ops::apply_rope(x, c, random_tensor({1, 5, 4}, 4), RopeLayout::Split), Error);  // shapes differ
  EXPECT_THROW(ops::apply_rope(x, random_tensor({6, 4}, 4), random_tensor({6, 4}, 5), RopeLayout::Split),
               Error);                                                             // T mismatch
  EXPECT_THROW(ops::apply_rope(x, random_tensor({4, 3, 5, 4}, 4), random_tensor({4, 3, 5, 4}, 5),
                               RopeLayout::Split),
               Error);                                                             // would grow x
  EXPECT_THROW(ops::apply_rope(x, random_tensor({1, 2, 3, 5, 4}, 4), random_tensor({1, 2, 3, 5, 4}, 5),
                               RopeLayout::Split),
               Error);                                                             // more dims than x
  EXPECT_THROW(ops::apply_rope(x.to(DType::BF16), c, s, RopeLayout::Split), Error);
  EXPECT_THROW(ops::apply_rope(x, c.to(DType::BF16), s.to(DType::BF16), RopeLayout::Split), Error);
  EXPECT_THROW(ops::apply_rope(x, c, Tensor(), RopeLayout::Split), Error);
}

// ---- qk_norm_rope_3d ----

// The double-precision expectation: per row rms-normalised, weighted, scaled, then rotated.
Tensor ref_qk_norm_rope(const Tensor& x, const Tensor& weight, double eps, double scale,
                        const ops::Rope3dTables& rope) {
  const Shape shape = x.shape();
  const int64_t d = shape[5];
  const auto vx = x.contiguous().to_double_vector();
  const auto vw = weight.defined() ? weight.to_double_vector() : std::vector<double>(d, 1.0);
  std::vector<std::vector<float>> vc(3), vs(3);
  for (int a = 0; a < 3; ++a) {
    vc[a] = rope.cos[a].contiguous().to_float_vector();
    vs[a] = rope.sin[a].contiguous().to_float_vector();
  }
  std::vector<double> y(vx.size());
  for (size_t r = 0; r < vx.size() / d; ++r) {
    const std::vector<int64_t> idx = test::unravel(static_cast<int64_t>(r * d), shape);
    const double* xr = &vx[r * d];
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += xr[i] * xr[i];
    const double rs = 1.0 / std::sqrt(ss / d + eps);
    std::vector<double> n(static_cast<size_t>(d));
    for (int64_t i = 0; i < d; ++i) n[i] = xr[i] * rs * vw[i] * scale;
    int64_t start = 0;
    for (int a = 0; a < 3; ++a) {
      const int64_t w = rope.cos[a].size(1), p = idx[1 + a];
      for (int64_t i = 0; i < w; i += 2) {
        const size_t at = static_cast<size_t>(p * w + i);
        const double c0 = vc[a][at], c1 = vc[a][at + 1], s0 = vs[a][at], s1 = vs[a][at + 1];
        const double x0 = n[start + i], x1 = n[start + i + 1];
        y[r * d + start + i] = x0 * c0 - x1 * s0;
        y[r * d + start + i + 1] = x1 * c1 + x0 * s1;
      }
      start += w;
    }
  }
  return Tensor::from_vector(y, shape);
}

TEST(QkNormRope3d, FusedIsBitIdenticalToTheUnfusedOpsAndMatchesDoubleReference) {
  struct Case {
    std::array<int64_t, 3> split;
    Shape shape;  // [B, T, H, W, heads, D]
    int64_t w_start;
  };
  const Case cases[] = {
      {{4, 6, 6}, {1, 3, 5, 7, 2, 16}, 0},     // the tiny decoder's head dim
      {{16, 24, 24}, {2, 3, 1, 5, 3, 64}, -3},  // the real one, W shifted left of 0
      {{2, 4, 2}, {1, 1, 3, 33, 1, 8}, 17},     // odd split, one frame, W shifted right
  };
  uint64_t seed = 300;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.shape.str());
    const auto [q, k, v] = test::fused_qkv_heads(c.shape, seed++);
    EXPECT_FALSE(q.is_contiguous());
    const int64_t d = c.shape[5];
    const Tensor qw = random_tensor({d}, seed++, 0.5f, 1.5f), kw = random_tensor({d}, seed++, 0.5f, 1.5f);
    const ops::Rope3dTables rope = test::rope3d_tables(c.split, c.shape[1], c.shape[2], c.shape[3], c.w_start);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const ops::QkRope got = ops::qk_norm_rope_3d(q, k, qw, kw, 1e-6, scale, rope);
    const ops::QkRope want = ops::qk_norm_rope_3d_unfused(q, k, qw, kw, 1e-6, scale, rope);
    EXPECT_TRUE(got.q.is_contiguous() && got.k.is_contiguous());
    EXPECT_TRUE(test::same_bytes(got.q, want.q));
    EXPECT_TRUE(test::same_bytes(got.k, want.k));
    EXPECT_ALLCLOSE(got.q, ref_qk_norm_rope(q, qw, 1e-6, scale, rope), 1e-5);
    EXPECT_ALLCLOSE(got.k, ref_qk_norm_rope(k, kw, 1e-6, 1.0, rope), 1e-5);
    // Strided everywhere (non-unit last-dim strides of x and the tables), no weights.
    ops::Rope3dTables strided;
    for (int a = 0; a < 3; ++a) {
      strided.cos[a] = non_contiguous_copy(rope.cos[a]);
      strided.sin[a] = non_contiguous_copy(rope.sin[a]);
    }
    const Tensor qs = non_contiguous_copy(q), ks = non_contiguous_copy(k);
    const ops::QkRope g2 = ops::qk_norm_rope_3d(qs, ks, Tensor(), Tensor(), 1e-6, 0.3, strided);
    const ops::QkRope w2 = ops::qk_norm_rope_3d_unfused(q, k, Tensor(), Tensor(), 1e-6, 0.3, rope);
    EXPECT_TRUE(test::same_bytes(g2.q, w2.q));
    EXPECT_TRUE(test::same_bytes(g2.k, w2.k));
    // The unfused rotation takes strided tables too.
    EXPECT_TRUE(test::same_bytes(ops::apply_rope_3d(qs, strided), ops::apply_rope_3d(q, rope)));
    // In place on the fused projection's views: the same values there, v untouched.
    const Tensor v_before = v.contiguous();
    ops::qk_norm_rope_3d_(q, k, qw, kw, 1e-6, scale, rope);
    EXPECT_TRUE(test::same_bytes(q.contiguous(), got.q));
    EXPECT_TRUE(test::same_bytes(k.contiguous(), got.k));
    EXPECT_TRUE(test::same_bytes(v.contiguous(), v_before));
  }
}

TEST(QkNormRope3d, HandlesEmptyInputs) {
  const Shape s{1, 2, 0, 3, 2, 8};
  const Tensor q = Tensor::zeros(s), k = Tensor::zeros(s);
  const ops::QkRope r =
      ops::qk_norm_rope_3d(q, k, Tensor(), Tensor(), 1e-6, 1.0, test::rope3d_tables({2, 4, 2}, 2, 0, 3, 0));
  EXPECT_EQ(r.q.shape(), s);
  EXPECT_EQ(r.k.shape(), s);
}

TEST(QkNormRope3d, RejectsBadArguments) {
  const Shape s{1, 2, 3, 4, 2, 8};
  const Tensor q = random_tensor(s, 1), k = random_tensor(s, 2), w = random_tensor({8}, 3);
  const ops::Rope3dTables rope = test::rope3d_tables({2, 4, 2}, 2, 3, 4, 0);
  auto call = [&](const Tensor& qq, const Tensor& kk, const Tensor& qw,
                  const ops::Rope3dTables& r) {
    return ops::qk_norm_rope_3d(qq, kk, qw, w, 1e-6, 0.5, r);
  };
  EXPECT_NO_THROW(call(q, k, w, rope));
  EXPECT_ERROR_HAS(call(q.select(0, 0), k.select(0, 0), w, rope), "[B, T, H, W, heads, D]");
  EXPECT_ERROR_HAS(call(q, random_tensor({1, 2, 3, 4, 1, 8}, 4), w, rope), "one shape and dtype");
  EXPECT_ERROR_HAS(call(q, k, random_tensor({6}, 5), rope), "q_weight must have shape [8]");
  EXPECT_ERROR_HAS(call(q.to(DType::BF16), k.to(DType::BF16), w, rope), "f32");  // CPU: f32 only
  EXPECT_ERROR_HAS(call(q, k, w, test::rope3d_tables({2, 4, 2}, 2, 3, 5, 0)), "the w tables");  // W 5 != 4
  EXPECT_ERROR_HAS(call(q, k, w, test::rope3d_tables({2, 2, 2}, 2, 3, 4, 0)), "add up");
  ops::Rope3dTables odd = rope;
  odd.cos[0] = random_tensor({2, 3}, 7);
  odd.sin[0] = random_tensor({2, 3}, 8);
  odd.cos[1] = random_tensor({3, 3}, 9);
  odd.sin[1] = random_tensor({3, 3}, 10);
  EXPECT_ERROR_HAS(call(q, k, w, odd), "d even");
  ops::Rope3dTables missing = rope;
  missing.sin[1] = Tensor();
  EXPECT_ERROR_HAS(call(q, k, w, missing), "the h table");
  ops::Rope3dTables uneven = rope;
  uneven.sin[2] = random_tensor({4, 4}, 6);
  EXPECT_ERROR_HAS(call(q, k, w, uneven), "the w tables");
  EXPECT_ERROR_HAS(ops::apply_rope_3d(q, missing), "the h table");
}

// rms_norm then the transformer's RoPE, as a naive double reference: x [B, T, D] normalised over
// D with the weight, then Interleaved over D or Split per head into [B, heads, T, Dh].
Tensor ref_rms_norm_rope(const Tensor& x, const Tensor& w, double eps, const Tensor& cos,
                         const Tensor& sin, RopeLayout layout, int64_t heads) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  const auto vx = x.to_double_vector(), vw = w.to_double_vector();
  std::vector<double> n(vx.size());
  for (int64_t r = 0; r < b * t; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += vx[r * d + i] * vx[r * d + i];
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (int64_t i = 0; i < d; ++i) n[r * d + i] = vx[r * d + i] * rs * vw[i];
  }
  const Tensor normed = Tensor::from_vector(n, x.shape());
  if (layout == RopeLayout::Interleaved) return ref_rope(normed, cos, sin, layout);
  return ref_rope(normed.view({b, t, heads, d / heads}).transpose(1, 2).contiguous(), cos, sin, layout);
}

TEST(RmsNormRope, EqualsTheUnfusedOpsAndMatchesDoubleReference) {
  uint64_t seed = 500;
  for (const RopeLayout layout : {RopeLayout::Split, RopeLayout::Interleaved}) {
    for (const int64_t heads : {1, 3}) {
      const int64_t B = 2, T = 7, Dh = 16, D = heads * Dh;
      SCOPED_TRACE(std::string(layout == RopeLayout::Split ? "split" : "interleaved") + " heads " +
                   std::to_string(heads));
      const Tensor x = random_tensor({B, T, D}, seed++, -3.f, 3.f);
      const Tensor w = random_tensor({D}, seed++, 0.5f, 1.5f);
      // The transformer's tables: Split [B, H, T, Dh / 2], Interleaved [B, T, D] (or shared by
      // the batch).
      const Shape ts = layout == RopeLayout::Split ? Shape{B, heads, T, Dh / 2} : Shape{1, T, D};
      const Tensor c = random_tensor(ts, seed++), sn = random_tensor(ts, seed++);
      const Tensor got = ops::rms_norm_rope(non_contiguous_copy(x), w, 1e-6, c, sn, layout, heads);
      const Shape want_shape = layout == RopeLayout::Split ? Shape{B, heads, T, Dh} : Shape{B, T, D};
      EXPECT_EQ(got.shape(), want_shape);
      EXPECT_TRUE(got.is_contiguous());
      EXPECT_TRUE(test::same_bytes(got, ops::rms_norm_rope_unfused(x, w, 1e-6, c, sn, layout, heads)));
      EXPECT_ALLCLOSE(got, ref_rms_norm_rope(x, w, 1e-6, c, sn, layout, heads), 1e-5);
      // No weight.
      EXPECT_TRUE(test::same_bytes(ops::rms_norm_rope(x, Tensor(), 1e-6, c, sn, layout, heads),
                                   ops::rms_norm_rope_unfused(x, Tensor(), 1e-6, c, sn, layout, heads)));
    }
  }
}

TEST(RmsNormRope, RejectsBadArguments) {
  const Tensor x = random_tensor({2, 5, 12}, 1), w = random_tensor({12}, 2);
  const Tensor cs = random_tensor({2, 3, 5, 2}, 3), ci = random_tensor({2, 5, 12}, 4);
  EXPECT_NO_THROW(ops::rms_norm_rope(x, w, 1e-6, cs, cs, RopeLayout::Split, 3));
  EXPECT_NO_THROW(ops::rms_norm_rope(x, w, 1e-6, ci, ci, RopeLayout::Interleaved, 3));
  EXPECT_ERROR_HAS(ops::rms_norm_rope(x.select(0, 0), w, 1e-6, ci, ci, RopeLayout::Interleaved, 3),
                   "[B, T, D]");
  EXPECT_ERROR_HAS(ops::rms_norm_rope(x, w, 1e-6, cs, cs, RopeLayout::Split, 5), "heads must split");
  EXPECT_ERROR_HAS(ops::rms_norm_rope(x, w, 1e-6, cs, cs, RopeLayout::Split, 4), "heads must split");
  EXPECT_ERROR_HAS(ops::rms_norm_rope(x, random_tensor({6}, 5), 1e-6, cs, cs, RopeLayout::Split, 3),
                   "weight");
  EXPECT_ERROR_HAS(ops::rms_norm_rope(x, w, 1e-6, ci, ci, RopeLayout::Split, 3), "rms_norm_rope");
  EXPECT_ERROR_HAS(ops::rms_norm_rope(x, w, 1e-6, random_tensor({3, 2, 3, 5, 2}, 6),
                                      random_tensor({3, 2, 3, 5, 2}, 7), RopeLayout::Split, 3),
                   "must broadcast");
  EXPECT_ERROR_HAS(ops::rms_norm_rope(x, w, 1e-6, cs, ci, RopeLayout::Split, 3), "must broadcast");
  EXPECT_ERROR_HAS(ops::rms_norm_rope(x.to(DType::BF16), w, 1e-6, ci, ci, RopeLayout::Interleaved, 3),
                   "f32");
}

// q and k with one pair of tables: each result is rms_norm_rope of its own tensor and weight, and
// near the double reference (a swapped weight or row would show).
TEST(QkRmsNormRope, EachResultIsRmsNormRopeOfItsOwnTensor) {
  uint64_t seed = 560;
  for (const RopeLayout layout : {RopeLayout::Split, RopeLayout::Interleaved}) {
    const int64_t B = 2, T = 5, heads = 2, Dh = 8, D = heads * Dh;
    const Tensor q = random_tensor({B, T, D}, seed++, -3.f, 3.f), k = random_tensor({B, T, D}, seed++, -2.f, 4.f);
    const Tensor qw = random_tensor({D}, seed++, 0.5f, 1.5f), kw = random_tensor({D}, seed++, 0.5f, 1.5f);
    const Shape ts = layout == RopeLayout::Split ? Shape{B, heads, T, Dh / 2} : Shape{1, T, D};
    const Tensor c = random_tensor(ts, seed++), sn = random_tensor(ts, seed++);
    const ops::QkRope r = ops::qk_rms_norm_rope(q, k, qw, kw, 1e-6, c, sn, layout, heads);
    EXPECT_TRUE(test::same_bytes(r.q, ops::rms_norm_rope(q, qw, 1e-6, c, sn, layout, heads)));
    EXPECT_TRUE(test::same_bytes(r.k, ops::rms_norm_rope(k, kw, 1e-6, c, sn, layout, heads)));
    EXPECT_ALLCLOSE(r.k, ref_rms_norm_rope(k, kw, 1e-6, c, sn, layout, heads), 1e-5);
    const ops::QkRope u = ops::qk_rms_norm_rope(q, k, Tensor(), Tensor(), 1e-6, c, sn, layout, heads);
    EXPECT_TRUE(test::same_bytes(u.k, ops::rms_norm_rope(k, Tensor(), 1e-6, c, sn, layout, heads)));
  }
}

TEST(QkRmsNormRope, RejectsBadArguments) {
  const Tensor q = random_tensor({2, 5, 12}, 1), w = random_tensor({12}, 2);
  const Tensor cs = random_tensor({2, 3, 5, 2}, 3);
  EXPECT_NO_THROW(ops::qk_rms_norm_rope(q, q, w, w, 1e-6, cs, cs, RopeLayout::Split, 3));
  EXPECT_ERROR_HAS(ops::qk_rms_norm_rope(q, random_tensor({2, 4, 12}, 4), w, w, 1e-6, cs, cs,
                                         RopeLayout::Split, 3),
                   "one shape and dtype");
  EXPECT_ERROR_HAS(ops::qk_rms_norm_rope(q, q.to(DType::F64), w, w, 1e-6, cs, cs, RopeLayout::Split, 3),
                   "one shape and dtype");
  EXPECT_ERROR_HAS(ops::qk_rms_norm_rope(q, q, w, random_tensor({6}, 5), 1e-6, cs, cs, RopeLayout::Split, 3),
                   "weight");
}

}  // namespace
}  // namespace ltx::rope_test
