#include "ops/neighborhood_attention.h"

#include <array>
#include <cmath>
#include <vector>

#include "io/safetensors.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::non_contiguous_copy;
using test::random_tensor;
using K3 = std::array<int64_t, 3>;

// Whether key position j is in the window of query position i (axis length L, kernel K), written
// from the rule itself: a K-wide window centred on i, moved inward until it fits; all of L if K >=
// L.
bool in_window(int64_t i, int64_t j, int64_t L, int64_t K) {
  if (K >= L) return true;
  int64_t lo = i - K / 2;
  if (lo < 0) lo = 0;
  if (lo + K > L) lo = L - K;
  return j >= lo && j < lo + K;
}

// Brute-force masked softmax over the whole volume, in double.
Tensor ref_na3d(const Tensor& q, const Tensor& k, const Tensor& v, const K3& kernel, double scale) {
  const Shape s = q.shape();
  const int64_t B = s[0], T = s[1], H = s[2], W = s[3], NH = s[4], D = s[5], Dv = v.size(5);
  const auto vq = q.to_double_vector(), vk = k.to_double_vector(), vv = v.to_double_vector();
  std::vector<double> out(static_cast<size_t>(B * T * H * W * NH * Dv), 0.0);
  auto at = [&](int64_t b, int64_t t, int64_t h, int64_t w, int64_t n, int64_t dim) {
    return static_cast<size_t>(((((b * T + t) * H + h) * W + w) * NH + n) * dim);
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          for (int64_t n = 0; n < NH; ++n) {
            std::vector<double> logits, weights;
            std::vector<size_t> rows;
            double mx = -INFINITY;
            for (int64_t t2 = 0; t2 < T; ++t2)
              for (int64_t h2 = 0; h2 < H; ++h2)
                for (int64_t w2 = 0; w2 < W; ++w2) {
                  if (!in_window(t, t2, T, kernel[0]) || !in_window(h, h2, H, kernel[1]) ||
                      !in_window(w, w2, W, kernel[2]))
                    continue;
                  double dot = 0;
                  for (int64_t c = 0; c < D; ++c)
                    dot += vq[at(b, t, h, w, n, D) + c] * vk[at(b, t2, h2, w2, n, D) + c];
                  logits.push_back(dot * scale);
                  rows.push_back(at(b, t2, h2, w2, n, Dv));
                  mx = std::max(mx, logits.back());
                }
            double sum = 0;
            for (double& l : logits) sum += (l = std::exp(l - mx));
            for (size_t j = 0; j < rows.size(); ++j)
              for (int64_t c = 0; c < Dv; ++c)
                out[at(b, t, h, w, n, Dv) + c] += logits[j] / sum * vv[rows[j] + c];
          }
  return Tensor::from_vector(out, {B, T, H, W, NH, Dv});
}

TEST(NeighborhoodAttention, MatchesBruteForceMaskedSoftmaxOnOddSizes) {
  struct Case {
    Shape shape;
    K3 kernel;
  };
  const std::vector<Case> cases = {
      {{1, 5, 6, 7, 2, 16}, {3, 5, 3}},  // restricted on every axis, shifted at the borders
      {{2, 3, 4, 9, 3, 7}, {3, 1, 5}},   // kernel 1 on H, odd head dim
      {{1, 4, 3, 5, 1, 33}, {5, 3, 7}},  // kernel >= length: whole axes
      {{1, 7, 1, 3, 2, 8}, {7, 1, 3}},   // single row
      {{1, 6, 5, 4, 2, 4}, {4, 2, 2}},   // even kernels
  };
  uint64_t seed = 1;
  for (const auto& c : cases) {
    const Tensor q = random_tensor(c.shape, seed++), k = random_tensor(c.shape, seed++),
                 v = random_tensor(c.shape, seed++);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.shape[5]));
    const Tensor ref = ref_na3d(q, k, v, c.kernel, scale);
    const Tensor out = ops::neighborhood_attention_3d(q, k, v, c.kernel);
    SCOPED_TRACE(c.shape.str());
    EXPECT_ALLCLOSE(out, ref, 2e-6);
  }
}

TEST(NeighborhoodAttention, AcceptsNonContiguousInputsAndAnExplicitScale) {
  const Shape shape{1, 5, 4, 6, 3, 12};
  const Tensor q = random_tensor(shape, 11), k = random_tensor(shape, 12);
  const Tensor v = random_tensor({1, 5, 4, 6, 3, 5}, 13);  // Dv != D
  const Tensor ref = ref_na3d(q, k, v, {3, 3, 5}, 0.7);
  const Tensor out = ops::neighborhood_attention_3d(non_contiguous_copy(q), non_contiguous_copy(k),
                                                    non_contiguous_copy(v), {3, 3, 5}, 0.7);
  EXPECT_ALLCLOSE(out, ref, 2e-6);
  // A permuted view whose head dim is not unit-stride.
  const Tensor qp = q.permute({0, 1, 2, 3, 5, 4}).contiguous().permute({0, 1, 2, 3, 5, 4});
  EXPECT_ALLCLOSE(ops::neighborhood_attention_3d(qp, k, v, {3, 3, 5}, 0.7), ref, 2e-6);
}

TEST(NeighborhoodAttention, WindowStartsFollowTheInwardShiftRule) {
  auto starts = [](int64_t L, int64_t K) {
    std::vector<int64_t> s;
    for (int64_t i = 0; i < L; ++i) s.push_back(ops::neighborhood_window_start(i, L, K));
    return s;
  };
  // The golden unit case's recorded starts (notes.na_unit.window_starts).
  EXPECT_EQ(starts(5, 3), (std::vector<int64_t>{0, 0, 1, 2, 2}));
  EXPECT_EQ(starts(6, 5), (std::vector<int64_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(starts(7, 3), (std::vector<int64_t>{0, 0, 1, 2, 3, 4, 4}));
  EXPECT_EQ(starts(6, 3), (std::vector<int64_t>{0, 0, 1, 2, 3, 3}));
  EXPECT_EQ(starts(7, 7), (std::vector<int64_t>(7, 0)));
  EXPECT_EQ(starts(3, 9), (std::vector<int64_t>(3, 0)));
}

TEST(NeighborhoodAttention, MatchesTheReferenceUnitCase) {
  // in.na_unit.{q,k,v} [1,5,6,7,2,16] -> out.na_unit.k{0,1} of the golden diffdec_ltx25 io file:
  // the reference's na3d with kernels (3,5,3) and (5,3,7), scale 1.
  const auto f = io::SafetensorsFile::open(test::fixture("diffdec_ltx25.test.io.safetensors"));
  const Tensor q = f->tensor("in.na_unit.q"), k = f->tensor("in.na_unit.k"),
               v = f->tensor("in.na_unit.v");
  const K3 kernels[2] = {{3, 5, 3}, {5, 3, 7}};
  for (int j = 0; j < 2; ++j) {
    const Tensor ref = f->tensor(str("out.na_unit.k", j));
    const Tensor out = ops::neighborhood_attention_3d(q, k, v, kernels[j], 1.0);
    EXPECT_LE(test::max_rel_err(out, ref), 1e-6) << j;
  }
}

// A range of query columns: exactly the full output's columns (the same per-query code), windows
// and keys still those of the whole W, including the border-shifted ones.
TEST(NeighborhoodAttention, QueryColumnsAreTheFullOutputsColumns) {
  const Tensor q = random_tensor({2, 3, 4, 13, 2, 8}, 11), k = random_tensor({2, 3, 4, 13, 2, 8}, 12),
               v = random_tensor({2, 3, 4, 13, 2, 6}, 13);
  const Tensor full = ops::neighborhood_attention_3d(q, k, v, {3, 3, 5}, 0.4);
  for (const ops::QueryColumns c : {ops::QueryColumns{0, 13}, ops::QueryColumns{5, 3},
                                    ops::QueryColumns{0, 1}, ops::QueryColumns{11, -1},
                                    ops::QueryColumns{13, 0}}) {
    const Tensor part = ops::neighborhood_attention_3d(q, k, v, {3, 3, 5}, 0.4, c);
    const int64_t n = c.count < 0 ? 13 - c.begin : c.count;
    ASSERT_EQ(part.shape(), Shape({2, 3, 4, n, 2, 6})) << c.begin;
    EXPECT_EQ(part.to_float_vector(), full.narrow(3, c.begin, n).contiguous().to_float_vector())
        << c.begin;
  }
  EXPECT_ERROR_HAS(ops::neighborhood_attention_3d(q, k, v, {3, 3, 5}, 0.4, {10, 4}),
                   "query columns");
  EXPECT_ERROR_HAS(ops::neighborhood_attention_3d(q, k, v, {3, 3, 5}, 0.4, {-1, 2}),
                   "query columns");
}

TEST(NeighborhoodAttention, RejectsBadArguments) {
  const Tensor q = random_tensor({1, 3, 3, 3, 1, 4}, 1);
  EXPECT_ERROR_HAS(ops::neighborhood_attention_3d(q, q, q, {0, 3, 3}), "kernel sizes");
  EXPECT_ERROR_HAS(ops::neighborhood_attention_3d(q.select(0, 0), q, q, {3, 3, 3}),
                   "q [B, T, H, W");
  EXPECT_ERROR_HAS(
      ops::neighborhood_attention_3d(q, random_tensor({1, 3, 3, 2, 1, 4}, 2), q, {3, 3, 3}),
      "same [B, T, H, W, heads]");
  EXPECT_ERROR_HAS(
      ops::neighborhood_attention_3d(q, random_tensor({1, 3, 3, 3, 1, 5}, 2), q, {3, 3, 3}),
      "same head dim");
  EXPECT_ERROR_HAS(ops::neighborhood_attention_3d(q.to(DType::BF16), q, q, {3, 3, 3}), "f32");
}

}  // namespace
}  // namespace ltx
