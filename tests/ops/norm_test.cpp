#include "ops/norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ops/elementwise.h"
#include "support/test_support.h"

namespace ltx::norm_test {
namespace {

using Values = std::vector<double>;

void expect_close(const Tensor& got, const Shape& shape, const Values& want, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  ASSERT_EQ(got.dtype(), DType::F32) << what;
  ASSERT_TRUE(got.is_contiguous()) << what;
  const Values g = got.to_double_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_LE(std::fabs(g[i] - want[i]), atol * std::max(1.0, std::fabs(want[i])))
        << what << " at " << i << ": got " << g[i] << ", want " << want[i];
  }
}

void expect_error_mentions(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected ltx::Error mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A non-contiguous 1-D vector with the same values (every other element of a bigger buffer).
Tensor strided_vector(const Tensor& v) {
  Tensor buf = Tensor::zeros({2 * v.size(0)});
  Tensor view = buf.slice(0, 0, 2 * v.size(0), 2);
  view.copy_from(v);
  return view;
}

// Normalises x over `dim` in double: (x - center) / sqrt(stat + eps) * w + b along that dim,
// where center is the mean (layer) or 0 (rms) and stat the biased variance or mean square.
Values ref_norm_dim(const Tensor& x, int dim, bool center, double eps, const Tensor& w, const Tensor& b) {
  const Values v = x.to_double_vector();
  const Values wv = w.defined() ? w.to_double_vector() : Values{};
  const Values bv = b.defined() ? b.to_double_vector() : Values{};
  int64_t inner = 1;
  for (int d = dim + 1; d < x.dim(); ++d) inner *= x.size(d);
  const int64_t D = x.size(dim), outer = x.numel() / (D * inner);
  Values out(v.size());
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t d) { return (a * D + d) * inner + i; };
      double m = 0;
      if (center) {
        for (int64_t d = 0; d < D; ++d) m += v[at(d)];
        m /= static_cast<double>(D);
      }
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += (v[at(d)] - m) * (v[at(d)] - m);
      const double r = 1.0 / std::sqrt(s / static_cast<double>(D) + eps);
      for (int64_t d = 0; d < D; ++d) {
        double y = (v[at(d)] - m) * r;
        if (!wv.empty()) y *= wv[d];
        if (!bv.empty()) y += bv[d];
        out[at(d)] = y;
      }
    }
  }
  return out;
}

TEST(RmsNorm, MatchesDoubleReferenceWithAndWithoutWeight) {
  uint64_t seed = 1;
  for (const Shape& s : {Shape{3, 7}, Shape{2, 5, 33}, Shape{129}, Shape{1, 1}, Shape{4, 1, 2, 3, 17}}) {
    const int64_t D = s.back();
    const Tensor x = test::random_tensor(s, ++seed, -3.f, 3.f);
    const Tensor w = test::random_tensor({D}, ++seed, 0.5f, 1.5f);
    for (double eps : {1e-6, 0.5}) {
      const std::string what = s.str() + " eps " + std::to_string(eps);
      const Values plain = ref_norm_dim(x, x.dim() - 1, false, eps, Tensor(), Tensor());
      const Values affine = ref_norm_dim(x, x.dim() - 1, false, eps, w, Tensor());
      expect_close(ops::rms_norm(x, Tensor(), eps), s, plain, 2e-6, what);
      expect_close(ops::rms_norm(test::non_contiguous_copy(x), w, eps), s, affine, 2e-6, what + " weight");
      expect_close(ops::rms_norm(x, strided_vector(w), eps), s, affine, 2e-6, what + " strided weight");
    }
  }
}

TEST(RmsNorm, EpsIsInsideTheSquareRoot) {
  // All-zero rows give zeros (not NaN); tiny rows are scaled by 1 / sqrt(eps), not 1 / eps.
  const Tensor z = ops::rms_norm(Tensor::zeros({2, 8}), Tensor(), 1e-6);
  EXPECT_EQ(test::max_abs_diff(z, Tensor::zeros({2, 8})), 0.0);
  const Tensor y = ops::rms_norm(Tensor::full({1, 4}, 1e-4), Tensor(), 1e-2);
  EXPECT_NEAR(y.to_double_vector()[0], 1e-4 / std::sqrt(1e-8 + 1e-2), 1e-9);
}

TEST(RmsNormDim, MatchesPixelNormOnEveryDim) {
  const Tensor base = test::random_tensor({2, 4, 3, 5}, 20, -2.f, 2.f);
  for (const Tensor& x : {base, test::non_contiguous_copy(base)}) {
    for (int dim : {0, 1, 2, 3}) {
      const Values want = ref_norm_dim(base, dim, false, 1e-8, Tensor(), Tensor());
      expect_close(ops::rms_norm_dim(x, dim, 1e-8), base.shape(), want, 2e-6, "dim " + std::to_string(dim));
    }
  }
  // Negative dims wrap; dim -1 equals rms_norm without weight.
  EXPECT_EQ(test::max_abs_diff(ops::rms_norm_dim(base, -3, 1e-6), ops::rms_norm_dim(base, 1, 1e-6)), 0.0);
  EXPECT_LE(test::max_abs_diff(ops::rms_norm_dim(base, -1, 1e-6), ops::rms_norm(base, Tensor(), 1e-6)), 1e-6);
  // Many columns (channels of a 300-pixel image).
  const Tensor img = test::random_tensor({1, 7, 300}, 21);
  expect_close(ops::rms_norm_dim(img, 1, 1e-8), img.shape(), ref_norm_dim(img, 1, false, 1e-8, Tensor(), Tensor()),
               2e-6, "pixel norm 300 columns");
}

// The fused PixelNorm + SiLU is silu(rms_norm_dim) bit for bit (f32: nothing rounds between),
// with its layout, on every dim and layout (contiguous, strided, channels-last, a gappy view of
// channels-last), and within f32 rounding of the double reference.
TEST(RmsNormDimSilu, EqualsSiluOfRmsNormDimBitForBit) {
  const Tensor base = test::random_tensor({2, 6, 3, 5, 7}, 22, -4.f, 4.f);
  const Tensor cl = base.to_channels_last();
  for (const Tensor& x : {base, test::non_contiguous_copy(base), cl, cl.narrow(2, 1, 2)}) {
    for (int dim : {0, 1, 4, -2}) {
      SCOPED_TRACE(x.describe() + " dim " + std::to_string(dim));
      const Tensor got = ops::rms_norm_dim_silu(x, dim, 1e-8);
      const Tensor norm = ops::rms_norm_dim(x, dim, 1e-8);
      const Tensor want = ops::silu(norm);
      EXPECT_EQ(got.strides(), want.strides());
      const Values g = got.to_double_vector(), w = want.to_double_vector();
      ASSERT_EQ(g.size(), w.size());
      EXPECT_EQ(std::memcmp(g.data(), w.data(), g.size() * sizeof(double)), 0);
      EXPECT_GT(test::max_abs_diff(got, norm), 0.1);  // the SiLU was applied
    }
  }
  Values want = ref_norm_dim(base, 1, false, 1e-8, Tensor(), Tensor());
  for (double& v : want) v = v / (1.0 + std::exp(-v));
  expect_close(ops::rms_norm_dim_silu(base, 1, 1e-8), base.shape(), want, 4e-6, "vs double");
}

// With a bias (the conv's, folded into the norm's pass): the result of adding it first, on dims
// 1 and 4 and a channels-last x; a bias of the wrong length is refused.
TEST(RmsNormDimSilu, BiasIsAddedBeforeTheNorm) {
  const Tensor base = test::random_tensor({2, 6, 3, 5, 7}, 23, -4.f, 4.f);
  for (const Tensor& x : {base, base.to_channels_last()}) {
    for (int dim : {1, 4}) {
      SCOPED_TRACE(x.describe() + " dim " + std::to_string(dim));
      const Tensor bias = test::random_tensor({x.size(dim)}, 24);
      Shape shape;
      for (int i = 0; i < x.dim(); ++i) shape.push_back(i == dim ? x.size(dim) : 1);
      const Tensor want = ops::rms_norm_dim_silu(ops::add(x, bias.view(shape)), dim, 1e-8);
      EXPECT_EQ(test::max_abs_diff(ops::rms_norm_dim_silu(x, dim, 1e-8, bias), want), 0.0);
    }
  }
  EXPECT_ERROR_HAS(ops::rms_norm_dim_silu(base, 1, 1e-8, test::random_tensor({5}, 25)),
                   "one value per entry of dim 1");
}

// The ResNet block's skip and the next PixelNorm + SiLU as one op: x becomes (x + bias) +
// residual in place and the result is rms_norm_dim_silu of it, bit for bit the ops in turn, on
// dims 1 and 4, contiguous and channels-last (the CPU's in-place adds are f32: bf16 is
// tests/cuda's); mismatched operands are refused.
TEST(AddThenAddRmsNormDimSilu, EqualsTheSkipThenTheNorm) {
  uint64_t seed = 40;
  for (DType dt : {DType::F32}) {
    const Tensor base = test::random_tensor({2, 6, 3, 5, 7}, seed++, -4.f, 4.f).to(dt);
    for (const Tensor& x0 : {base, base.to_channels_last()}) {
      for (int dim : {1, 4}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " " + x0.describe() + " dim " + std::to_string(dim));
        const Tensor bias = test::random_tensor({x0.size(dim)}, seed++).to(dt);
        const Tensor residual = test::random_tensor(x0.shape(), seed++, -2.f, 2.f).to(dt);
        Shape shape;
        for (int i = 0; i < x0.dim(); ++i) shape.push_back(i == dim ? x0.size(dim) : 1);
        const Tensor want_x = x0.clone();
        ops::add_then_add_(want_x, bias.view(shape), residual);
        const Tensor want_h = ops::rms_norm_dim_silu(want_x, dim, 1e-8);
        const Tensor x = x0.clone();
        const Tensor h = ops::add_then_add_rms_norm_dim_silu_(x, bias, residual, dim, 1e-8);
        EXPECT_EQ(test::max_abs_diff(x, want_x), 0.0);
        EXPECT_EQ(test::max_abs_diff(h, want_h), 0.0);
        EXPECT_EQ(h.dtype(), dt);
      }
    }
  }
  const Tensor x = test::random_tensor({2, 6, 3, 5, 7}, 50);
  EXPECT_ERROR_HAS(ops::add_then_add_rms_norm_dim_silu_(x, test::random_tensor({5}, 51), x.clone(), 1, 1e-8),
                   "one value per entry of dim 1");
  EXPECT_ERROR_HAS(ops::add_then_add_rms_norm_dim_silu_(x, test::random_tensor({6}, 52),
                                                        test::random_tensor({2, 6, 3, 5, 6}, 53), 1, 1e-8),
                   "must have the shape of x");
}

TEST(LayerNorm, MatchesDoubleReferenceForEachAffineCombination) {
  uint64_t seed = 30;
  for (const Shape& s : {Shape{3, 7}, Shape{2, 5, 33}, Shape{4, 129}, Shape{1}}) {
    const int64_t D = s.back();
    const Tensor x = test::random_tensor(s, ++seed, -3.f, 3.f);
    const Tensor w = test::random_tensor({D}, ++seed, 0.5f, 1.5f);
    const Tensor b = test::random_tensor({D}, ++seed, -1.f, 1.f);
    for (int combo = 0; combo < 4; ++combo) {
      const Tensor wc = combo & 1 ? w : Tensor();
      const Tensor bc = combo & 2 ? b : Tensor();
      const Values want = ref_norm_dim(x, x.dim() - 1, true, 1e-5, wc, bc);
      const std::string what = s.str() + " combo " + std::to_string(combo);
      expect_close(ops::layer_norm(x, wc, bc, 1e-5), s, want, 2e-6, what);
      expect_close(ops::layer_norm(test::non_contiguous_copy(x), wc.defined() ? strided_vector(wc) : wc, bc, 1e-5),
                   s, want, 2e-6, what + " non-contiguous");
    }
  }
}

TEST(LayerNorm, StableWithLargeMeanSmallSpread) {
  const Values r = test::random_tensor({4 * 257}, 40, -1.f, 1.f).to_double_vector();
  std::vector<float> v(r.size());
  for (size_t i = 0; i < r.size(); ++i) v[i] = static_cast<float>(1000.0 + r[i]);
  const Tensor x = Tensor::from_vector(v, {4, 257});
  // The f32 mean is off by up to half an ulp of 1000 (3e-5), which the output carries / std.
  expect_close(ops::layer_norm(x, Tensor(), Tensor(), 1e-6), x.shape(),
               ref_norm_dim(x, 1, true, 1e-6, Tensor(), Tensor()), 1e-4, "offset 1000");
}

Values ref_group_norm(const Tensor& x, int64_t G, double eps, const Tensor& w, const Tensor& b) {
  const Values v = x.to_double_vector();
  const Values wv = w.defined() ? w.to_double_vector() : Values{};
  const Values bv = b.defined() ? b.to_double_vector() : Values{};
  const int64_t N = x.size(0), C = x.size(1), hw = x.numel() / (N * C), cg = C / G;
  Values out(v.size());
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      double m = 0, s = 0;
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        for (int64_t i = 0; i < hw; ++i) m += v[(n * C + c) * hw + i];
      m /= static_cast<double>(cg * hw);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c)
        for (int64_t i = 0; i < hw; ++i) s += std::pow(v[(n * C + c) * hw + i] - m, 2);
      const double r = 1.0 / std::sqrt(s / static_cast<double>(cg * hw) + eps);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        for (int64_t i = 0; i < hw; ++i) {
          double y = (v[(n * C + c) * hw + i] - m) * r;
          if (!wv.empty()) y *= wv[c];
          if (!bv.empty()) y += bv[c];
          out[(n * C + c) * hw + i] = y;
        }
      }
    }
  }
  return out;
}

TEST(GroupNorm, MatchesDoubleReference) {
  struct Case {
    Shape shape;
    int64_t groups;
  };
  const std::vector<Case> cases = {{{2, 6, 5, 3}, 1}, {{2, 6, 5, 3}, 2}, {{2, 6, 5, 3}, 3},
                                   {{2, 6, 5, 3}, 6}, {{4, 6}, 3},       {{2, 4, 7}, 2},
                                   {{1, 4, 2, 3, 3}, 2}, {{1, 64, 33}, 32}};
  uint64_t seed = 50;
  for (const Case& c : cases) {
    const int64_t C = c.shape[1];
    const Tensor x = test::random_tensor(c.shape, ++seed, -2.f, 3.f);
    const Tensor w = test::random_tensor({C}, ++seed, 0.5f, 1.5f);
    const Tensor b = test::random_tensor({C}, ++seed, -1.f, 1.f);
    for (int combo = 0; combo < 4; ++combo) {
      const Tensor wc = combo & 1 ? w : Tensor();
      const Tensor bc = combo & 2 ? b : Tensor();
      const std::string what = c.shape.str() + " G=" + std::to_string(c.groups) + " combo " + std::to_string(combo);
      const Values want = ref_group_norm(x, c.groups, 1e-6, wc, bc);
      expect_close(ops::group_norm(x, c.groups, wc, bc, 1e-6), c.shape, want, 2e-6, what);
      expect_close(ops::group_norm(test::non_contiguous_copy(x), c.groups, wc, bc.defined() ? strided_vector(bc) : bc,
                                   1e-6),
                   c.shape, want, 2e-6, what + " non-contiguous");
    }
  }
}

TEST(GroupNorm, GroupsOfOneChannelDifferFromOneGroup) {
  // Guards against the statistics ignoring the group split.
  const Tensor x = test::random_tensor({1, 4, 9}, 60);
  EXPECT_GT(test::max_abs_diff(ops::group_norm(x, 4, Tensor(), Tensor(), 1e-6),
                               ops::group_norm(x, 1, Tensor(), Tensor(), 1e-6)),
            1e-3);
}

// rms_norm(x) * (1 + scale) + shift in double, scale/shift broadcast over x [B, T, D] from
// [sb, st, D] (sb in {1, B}, st in {1, T}).
Values ref_rms_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, double eps) {
  const Values n = ref_norm_dim(x, x.dim() - 1, false, eps, Tensor(), Tensor());
  const Tensor sc = scale.expand(x.shape()).contiguous(), sh = shift.expand(x.shape()).contiguous();
  const Values sv = sc.to_double_vector(), tv = sh.to_double_vector();
  Values out(n.size());
  for (size_t i = 0; i < n.size(); ++i) out[i] = n[i] * (1.0 + sv[i]) + tv[i];
  return out;
}

TEST(RmsNormModulate, MatchesDoubleReferencePerSampleAndPerToken) {
  uint64_t seed = 300;
  for (int64_t b : {1, 2}) {
    for (int64_t t : {1, 3, 33}) {
      for (int64_t d : {1, 7, 129}) {
        const Tensor x = test::random_tensor({b, t, d}, seed++, -3.f, 5.f);
        for (int64_t st : {int64_t{1}, t}) {
          const std::string what =
              "b " + std::to_string(b) + " t " + std::to_string(t) + " d " + std::to_string(d) + " st " + std::to_string(st);
          const Tensor scale = test::random_tensor({b, st, d}, seed++);
          const Tensor shift = test::random_tensor({1, st, d}, seed++);
          expect_close(ops::rms_norm_modulate(test::non_contiguous_copy(x), test::non_contiguous_copy(scale),
                                              shift, 1e-6),
                       x.shape(), ref_rms_norm_modulate(x, scale, shift, 1e-6), 1e-5, what);
        }
      }
    }
  }
}

TEST(RmsNormModulate, EqualsTheUnfusedOpsBitForBit) {
  // The transformer's f32 path must not change: the fused op is the composition on the CPU.
  const Tensor x = test::random_tensor({2, 17, 40}, 320, -2.f, 2.f);
  const Tensor scale = test::random_tensor({2, 1, 40}, 321), shift = test::random_tensor({2, 17, 40}, 322);
  const Tensor want = ops::modulate(ops::rms_norm(x, Tensor(), 1e-6), scale, shift);
  EXPECT_EQ(test::max_abs_diff(ops::rms_norm_modulate(x, scale, shift, 1e-6), want), 0.0);
  // Guards against the modulation being skipped.
  EXPECT_GT(test::max_abs_diff(want, ops::rms_norm(x, Tensor(), 1e-6)), 1e-2);
  // With a weight (the diffusion decoder's norms): the weighted norm, then the modulation.
  const Tensor w = test::random_tensor({40}, 323, 0.5f, 1.5f);
  const Tensor want_w = ops::modulate(ops::rms_norm(x, w, 1e-6), scale, shift);
  EXPECT_EQ(test::max_abs_diff(ops::rms_norm_modulate(x, scale, shift, 1e-6, w), want_w), 0.0);
  EXPECT_GT(test::max_abs_diff(want_w, want), 1e-3);
  expect_error_mentions([&] { ops::rms_norm_modulate(x, scale, shift, 1e-6, test::random_tensor({39}, 324)); },
                        "weight");
}

// The transformer block's gated residual and the next AdaLN input in one op: on the CPU exactly
// the two ops, Summed gate / scale / shift included; bad shapes fail naming the argument.
TEST(GatedAddRmsNormModulate, EqualsGatedAddThenRmsNormModulate) {
  const Tensor x = test::random_tensor({2, 17, 40}, 330, -2.f, 2.f);
  const Tensor y = test::random_tensor({2, 17, 40}, 331, -2.f, 2.f);
  const Tensor table = test::random_tensor({3, 40}, 332), emb = test::random_tensor({2, 17, 3, 40}, 333);
  const ops::Summed gate{table.select(0, 0), emb.select(2, 0)};
  const ops::Summed scale{table.select(0, 1), emb.select(2, 1)}, shift = emb.select(2, 2);
  const ops::ResidualNorm got = ops::gated_add_rms_norm_modulate(x, y, gate, scale, shift, 1e-6);
  const Tensor want_x = ops::gated_add(x, y, gate);
  EXPECT_EQ(test::max_abs_diff(got.x, want_x), 0.0);
  EXPECT_EQ(test::max_abs_diff(got.h, ops::rms_norm_modulate(want_x, scale, shift, 1e-6)), 0.0);
  EXPECT_GT(test::max_abs_diff(got.x, x), 1e-3);  // the residual was added
  expect_error_mentions(
      [&] { ops::gated_add_rms_norm_modulate(x, test::random_tensor({2, 17, 39}, 334), gate, scale, shift, 1e-6); },
      "gated_add");
  expect_error_mentions(
      [&] { ops::gated_add_rms_norm_modulate(x, y, gate, test::random_tensor({2, 17, 39}, 335), shift, 1e-6); },
      "scale");
}

// With a second modulation of the same norm: on the CPU exactly the ops in turn.
TEST(GatedAddRmsNormModulate, TwoModulationsEqualTheOpsInTurn) {
  const Tensor x = test::random_tensor({2, 17, 40}, 336, -2.f, 2.f);
  const Tensor y = test::random_tensor({2, 17, 40}, 337, -2.f, 2.f);
  const Tensor table = test::random_tensor({5, 40}, 338), emb = test::random_tensor({2, 1, 5, 40}, 339);
  const ops::Summed gate{table.select(0, 0), emb.select(2, 0)};
  const ops::Summed scale{table.select(0, 1), emb.select(2, 1)}, shift = emb.select(2, 2);
  const ops::Summed scale2{table.select(0, 3), emb.select(2, 3)}, shift2 = table.select(0, 4);
  const ops::ResidualNorm2 got =
      ops::gated_add_rms_norm_modulate2(x, y, gate, scale, shift, scale2, shift2, 1e-6);
  const Tensor want_x = ops::gated_add(x, y, gate);
  EXPECT_EQ(test::max_abs_diff(got.x, want_x), 0.0);
  EXPECT_EQ(test::max_abs_diff(got.h, ops::rms_norm_modulate(want_x, scale, shift, 1e-6)), 0.0);
  EXPECT_EQ(test::max_abs_diff(got.h2, ops::rms_norm_modulate(want_x, scale2, shift2, 1e-6)), 0.0);
  EXPECT_GT(test::max_abs_diff(got.h, got.h2), 1e-3);  // two different modulations
  expect_error_mentions(
      [&] { ops::gated_add_rms_norm_modulate2(x, y, gate, scale, shift, test::random_tensor({2, 17, 39}, 341), shift2, 1e-6); },
      "scale");
}

TEST(RmsNormModulate, IntoWritesAViewWithTheSameBits) {
  const Tensor x = test::random_tensor({2, 3, 9, 8}, 340, -2.f, 2.f);
  const Tensor scale = test::random_tensor({2, 1, 1, 8}, 341), shift = test::random_tensor({2, 1, 1, 8}, 342);
  const Tensor w = test::random_tensor({8}, 343, 0.5f, 1.5f);
  const Tensor src = x.narrow(2, 2, 5);
  Tensor canvas = Tensor::full({2, 3, 7, 8}, 3.0);
  ops::rms_norm_modulate_into(canvas.narrow(2, 1, 5), src, scale, shift, 1e-6, w);
  EXPECT_EQ(test::max_abs_diff(canvas.narrow(2, 1, 5), ops::rms_norm_modulate(src, scale, shift, 1e-6, w)), 0.0);
  EXPECT_EQ(test::max_abs_diff(canvas.narrow(2, 0, 1), Tensor::full({2, 3, 1, 8}, 3.0)), 0.0);
  EXPECT_EQ(test::max_abs_diff(canvas.narrow(2, 6, 1), Tensor::full({2, 3, 1, 8}, 3.0)), 0.0);
  expect_error_mentions([&] { ops::rms_norm_modulate_into(canvas.narrow(2, 0, 4), src, scale, shift, 1e-6); },
                        "x's shape");
  expect_error_mentions(
      [&] { ops::rms_norm_modulate_into(Tensor::zeros(src.shape(), DType::BF16), src, scale, shift, 1e-6); },
      "dtype");
}

TEST(RmsNormModulate, RejectsBadArguments) {
  const Tensor x = test::random_tensor({2, 3, 4}, 330), ok = test::random_tensor({2, 1, 4}, 331);
  expect_error_mentions([&] { ops::rms_norm_modulate(x, Tensor::zeros({2, 3, 5}), ok, 1e-6); }, "rms_norm_modulate");
  // scale/shift may not grow the result beyond x's shape.
  expect_error_mentions([&] { ops::rms_norm_modulate(x, Tensor::zeros({3, 2, 3, 4}), ok, 1e-6); }, "x's shape");
  expect_error_mentions([&] { ops::rms_norm_modulate(x, ok, Tensor(), 1e-6); }, "rms_norm_modulate");
  expect_error_mentions([&] { ops::rms_norm_modulate(x.to(DType::F64), ok, ok, 1e-6); }, "f32");
  expect_error_mentions([&] { ops::rms_norm_modulate(x, ok.to(DType::BF16), ok, 1e-6); }, "f32");
  EXPECT_EQ(ops::rms_norm_modulate(Tensor::zeros({0, 4}), Tensor::zeros({4}), Tensor::zeros({4}), 1e-6).shape(),
            Shape({0, 4}));
}

TEST(Norms, RejectBadArguments) {
  const Tensor x = test::random_tensor({2, 6, 4}, 70);
  expect_error_mentions([&] { ops::group_norm(x, 4, Tensor(), Tensor(), 1e-6); }, "divide");
  expect_error_mentions([&] { ops::group_norm(x, 0, Tensor(), Tensor(), 1e-6); }, "num_groups");
  expect_error_mentions([&] { ops::group_norm(Tensor::zeros({6}), 2, Tensor(), Tensor(), 1e-6); }, "at least 2");
  expect_error_mentions([&] { ops::group_norm(x, 3, Tensor::zeros({5}), Tensor(), 1e-6); }, "weight");
  expect_error_mentions([&] { ops::group_norm(x, 3, Tensor(), Tensor::zeros({6}, DType::BF16), 1e-6); }, "f32");
  expect_error_mentions([&] { ops::rms_norm(x, Tensor::zeros({6}), 1e-6); }, "[4]");
  expect_error_mentions([&] { ops::rms_norm(x.to(DType::F64), Tensor(), 1e-6); }, "f32");
  expect_error_mentions([&] { ops::rms_norm(Tensor::full({}, 1.0), Tensor(), 1e-6); }, "rms_norm");
  expect_error_mentions([&] { ops::layer_norm(x, Tensor(), Tensor::zeros({4, 1}), 1e-6); }, "bias");
  expect_error_mentions([&] { ops::layer_norm(x.to(DType::BF16), Tensor(), Tensor(), 1e-6); }, "f32");
  expect_error_mentions([&] { ops::rms_norm_dim(x, 3, 1e-6); }, "rms_norm_dim");
  expect_error_mentions([&] { ops::rms_norm_dim(x.to(DType::F16), 1, 1e-6); }, "f32");
  expect_error_mentions([&] { ops::rms_norm_dim_silu(x, -4, 1e-6); }, "rms_norm_dim_silu");
  EXPECT_THROW(ops::layer_norm(Tensor(), Tensor(), Tensor(), 1e-6), Error);
}

TEST(Norms, EmptyInputsGiveEmptyOutputs) {
  EXPECT_EQ(ops::rms_norm(Tensor::zeros({0, 4}), Tensor::zeros({4}), 1e-6).shape(), Shape({0, 4}));
  EXPECT_EQ(ops::layer_norm(Tensor::zeros({3, 0}), Tensor(), Tensor(), 1e-6).shape(), Shape({3, 0}));
  EXPECT_EQ(ops::group_norm(Tensor::zeros({0, 4, 3}), 2, Tensor(), Tensor(), 1e-6).shape(), Shape({0, 4, 3}));
  EXPECT_EQ(ops::rms_norm_dim(Tensor::zeros({2, 0, 3}), 1, 1e-6).shape(), Shape({2, 0, 3}));
  EXPECT_EQ(ops::rms_norm_dim_silu(Tensor::zeros({2, 0, 3}), 1, 1e-6).shape(), Shape({2, 0, 3}));
}

}  // namespace
}  // namespace ltx::norm_test
