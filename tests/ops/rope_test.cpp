#include <vector>

#include "ops/rope.h"
#include "support/test_support.h"

namespace ltx {
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

}  // namespace
}  // namespace ltx
