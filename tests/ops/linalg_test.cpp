#include <cblas.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "backend/cpu/linalg.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::non_contiguous_copy;
using test::random_tensor;

Shape cat(const Shape& a, std::initializer_list<int64_t> tail) {
  Shape s = a;
  for (int64_t v : tail) s.push_back(v);
  return s;
}

// Naive double-precision torch.matmul for operands with >= 2 dims.
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  Shape ab, bb;
  for (int d = 0; d + 2 < a.dim(); ++d) ab.push_back(a.size(d));
  for (int d = 0; d + 2 < b.dim(); ++d) bb.push_back(b.size(d));
  const Shape batch = broadcast_shapes(ab, bb, "ref");
  const std::vector<double> va = a.expand(cat(batch, {m, k})).to_double_vector();
  const std::vector<double> vb = b.expand(cat(batch, {k, n})).to_double_vector();
  std::vector<double> out(static_cast<size_t>(batch.numel() * m * n), 0.0);
  for (int64_t bi = 0; bi < batch.numel(); ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += va[static_cast<size_t>((bi * m + i) * k + p)] *
                 vb[static_cast<size_t>((bi * k + p) * n + j)];
        out[static_cast<size_t>((bi * m + i) * n + j)] = acc;
      }
  return Tensor::from_vector(out, cat(batch, {m, n}));
}

Tensor ref_linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  Tensor y = ref_matmul(x.dim() == 1 ? x.unsqueeze(0) : x, w.transpose(0, 1));
  if (x.dim() == 1) y = y.squeeze(0);
  if (!bias.defined()) return y;
  std::vector<double> v = y.to_double_vector();
  const std::vector<double> b = bias.to_double_vector();
  for (size_t i = 0; i < v.size(); ++i) v[i] += b[i % b.size()];
  return Tensor::from_vector(v, y.shape());
}

// fp32 accumulation error bound for inputs in [-1, 1].
double tol(int64_t k) { return 1e-6 * static_cast<double>(k) + 1e-6; }

TEST(GemmOperand, DescribesRowMajorTransposedAndRejectsOtherLayouts) {
  cpu::GemmOperand op;
  ASSERT_TRUE(cpu::as_gemm_operand(3, 5, 8, 1, &op));  // padded rows
  EXPECT_FALSE(op.trans);
  EXPECT_EQ(op.ld, 8);
  ASSERT_TRUE(cpu::as_gemm_operand(3, 5, 1, 4, &op));  // transposed view
  EXPECT_TRUE(op.trans);
  EXPECT_EQ(op.ld, 4);
  ASSERT_TRUE(cpu::as_gemm_operand(1, 5, 0, 1, &op));  // single row: row stride irrelevant
  EXPECT_FALSE(op.trans);
  EXPECT_EQ(op.ld, 5);
  ASSERT_TRUE(cpu::as_gemm_operand(4, 1, 7, 0, &op));  // single column
  EXPECT_FALSE(op.trans);
  EXPECT_EQ(op.ld, 7);
  EXPECT_FALSE(cpu::as_gemm_operand(3, 5, 4, 1, &op));   // rows overlap
  EXPECT_FALSE(cpu::as_gemm_operand(3, 5, 10, 2, &op));  // no unit stride
  EXPECT_FALSE(cpu::as_gemm_operand(3, 5, 0, 1, &op));   // broadcast rows
}

// Each output summed over k from 0 up, every product rounded to f32 before its addition.
std::vector<float> in_order_reference(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const std::vector<double> va = a.to_double_vector(), vb = b.to_double_vector();
  std::vector<float> out(static_cast<size_t>(m * n), 0.0f);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      volatile float acc = 0.0f;  // no contraction into a fused multiply-add
      for (int64_t j = 0; j < k; ++j) {
        volatile float prod = static_cast<float>(va[r * k + j]) * static_cast<float>(vb[j * n + c]);
        acc = acc + prod;
      }
      out[static_cast<size_t>(r * n + c)] = acc;
    }
  return out;
}

TEST(MatmulInOrder, SumsEachOutputInIncreasingKBitForBit) {
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {7, 5, 9}, {33, 1, 65}, {3, 130, 17}, {1, 384, 4}}) {
    const Tensor a = random_tensor({m, k}, 1 + m), b = random_tensor({k, n}, 2 + n);
    const Tensor got = ops::matmul_in_order(non_contiguous_copy(a), b);
    ASSERT_EQ(got.shape(), (Shape{m, n}));
    const std::vector<float> want = in_order_reference(a, b);
    EXPECT_EQ(got.to_double_vector(), std::vector<double>(want.begin(), want.end()))
        << m << "x" << k << "x" << n;
    // And it is the matrix product (to f32 rounding).
    EXPECT_LT(test::max_abs_diff(got, ops::matmul(a, b)), 1e-4) << m << "x" << k << "x" << n;
  }
  EXPECT_EQ(test::max_abs_diff(ops::matmul_in_order(Tensor::zeros({2, 0}), Tensor::zeros({0, 3})),
                               Tensor::zeros({2, 3})),
            0.0);
}

TEST(MatmulInOrder, RejectsWhatItDoesNotTake) {
  EXPECT_THROW(ops::matmul_in_order(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})), Error);
  EXPECT_THROW(ops::matmul_in_order(Tensor::zeros({2, 3, 1}), Tensor::zeros({1, 5})), Error);
  EXPECT_THROW(ops::matmul_in_order(Tensor::zeros({2, 3}).to(DType::BF16), Tensor::zeros({3, 5})),
               Error);
}

TEST(Matmul, MatchesDoubleReferenceOnOddSizes) {
  const int64_t sizes[] = {1, 3, 7, 33, 129};
  uint64_t seed = 1;
  for (int64_t m : sizes)
    for (int64_t k : sizes)
      for (int64_t n : sizes) {
        const Tensor a = random_tensor({m, k}, seed++), b = random_tensor({k, n}, seed++);
        const Tensor y = ops::matmul(a, b);
        SCOPED_TRACE(str(m, "x", k, "x", n));
        EXPECT_ALLCLOSE(y, ref_matmul(a, b), tol(k));
      }
}

TEST(Matmul, BroadcastsBatchDims) {
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {
      {{2, 1, 3, 5}, {4, 5, 7}},
      {{3, 7, 5}, {5, 7}},  // shared right operand: one folded GEMM
      {{5, 7}, {3, 7, 5}},  // shared left operand
      {{1, 4, 6}, {2, 1, 6, 3}},
      {{2, 3, 1, 4}, {1, 3, 4, 1}},
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    const Tensor a = random_tensor(c.a, seed++), b = random_tensor(c.b, seed++);
    const Tensor y = ops::matmul(a, b);
    const Tensor r = ref_matmul(a, b);
    EXPECT_EQ(y.shape(), r.shape());
    EXPECT_TRUE(y.is_contiguous());
    EXPECT_EQ(y.dtype(), DType::F32);
    SCOPED_TRACE(c.a.str() + " @ " + c.b.str());
    EXPECT_ALLCLOSE(y, r, tol(8));
  }
  EXPECT_EQ(ops::matmul(random_tensor({2, 1, 3, 5}, 1), random_tensor({4, 5, 7}, 2)).shape(),
            Shape({2, 4, 3, 7}));
}

TEST(Matmul, AcceptsTransposedStridedAndBroadcastViews) {
  const int64_t bsz = 3, m = 33, k = 17, n = 9;
  const Tensor a = random_tensor({bsz, m, k}, 7), b = random_tensor({bsz, k, n}, 8);
  const Tensor want = ref_matmul(a, b);
  // Transposed views of contiguous [B, K, M] / [B, N, K] buffers (BLAS transpose flags).
  const Tensor at = a.transpose(1, 2).contiguous().transpose(1, 2);
  const Tensor bt = b.transpose(1, 2).contiguous().transpose(1, 2);
  ASSERT_FALSE(at.is_contiguous());
  EXPECT_ALLCLOSE(ops::matmul(at, b), want, tol(k));
  EXPECT_ALLCLOSE(ops::matmul(a, bt), want, tol(k));
  EXPECT_ALLCLOSE(ops::matmul(at, bt), want, tol(k));
  // Padded rows (leading dimension > cols), gaps between batches.
  Tensor a_pad = Tensor::zeros({bsz + 1, m + 2, k + 5});
  a_pad.narrow(0, 0, bsz).narrow(1, 1, m).narrow(2, 3, k).copy_from(a);
  const Tensor a_view = a_pad.narrow(0, 0, bsz).narrow(1, 1, m).narrow(2, 3, k);
  EXPECT_ALLCLOSE(ops::matmul(a_view, b), want, tol(k));
  // Shared right operand with a padded left one: the folded path must not be taken.
  const Tensor b0 = b.select(0, 0);
  EXPECT_ALLCLOSE(ops::matmul(a_view, b0), ref_matmul(a, b0), tol(k));
  // Layouts BLAS cannot take (copied first).
  EXPECT_ALLCLOSE(ops::matmul(non_contiguous_copy(a), non_contiguous_copy(b)), want, tol(k));
  const Tensor a_step = Tensor::zeros({bsz, m, 2 * k}).slice(2, 0, 2 * k, 2);
  a_step.copy_from(a);
  EXPECT_ALLCLOSE(ops::matmul(a_step, b), want, tol(k));
  // Stride-0 batch broadcast given by the caller.
  const Tensor a1 = random_tensor({1, m, k}, 9);
  EXPECT_ALLCLOSE(ops::matmul(a1.expand({bsz, m, k}), b), ref_matmul(a1, b), tol(k));
  // Stride-0 inside the matrix (expanded rows) needs a copy.
  const Tensor row = random_tensor({1, k}, 10);
  EXPECT_ALLCLOSE(ops::matmul(row.expand({m, k}), b0), ref_matmul(row.expand({m, k}), b0),
                  tol(k));
}

TEST(Matmul, ManySmallAndSomeLargeBatchesMatch) {
  // Small GEMMs are spread over the thread pool, large ones run one after another.
  const Tensor a = random_tensor({64, 3, 5}, 11), b = random_tensor({64, 5, 7}, 12);
  EXPECT_ALLCLOSE(ops::matmul(a, b), ref_matmul(a, b), tol(5));
  const Tensor a4 = random_tensor({4, 16, 3, 5}, 13), b4 = random_tensor({16, 5, 1}, 14);
  EXPECT_ALLCLOSE(ops::matmul(a4, b4), ref_matmul(a4, b4), tol(5));
  const Tensor c = random_tensor({3, 70, 129}, 15), d = random_tensor({3, 129, 65}, 16);
  EXPECT_ALLCLOSE(ops::matmul(c, d), ref_matmul(c, d), tol(129));
}

TEST(Matmul, VectorOperandsFollowTorch) {
  const Tensor v = random_tensor({7}, 20), m = random_tensor({7, 5}, 21),
               bm = random_tensor({2, 3, 7}, 22), bv = random_tensor({2, 7, 4}, 23);
  const Tensor vm = ops::matmul(v, m);
  EXPECT_EQ(vm.shape(), Shape({5}));
  EXPECT_ALLCLOSE(vm, ref_matmul(v.unsqueeze(0), m).squeeze(0), tol(7));
  const Tensor mv = ops::matmul(bm, v);
  EXPECT_EQ(mv.shape(), Shape({2, 3}));
  EXPECT_ALLCLOSE(mv, ref_matmul(bm, v.unsqueeze(1)).squeeze(2), tol(7));
  const Tensor vb = ops::matmul(v, bv);
  EXPECT_EQ(vb.shape(), Shape({2, 4}));
  EXPECT_ALLCLOSE(vb, ref_matmul(v.unsqueeze(0), bv).squeeze(1), tol(7));
  const Tensor dot = ops::matmul(v, v);
  EXPECT_EQ(dot.dim(), 0);
  double want = 0;
  for (double x : v.to_double_vector()) want += x * x;
  EXPECT_NEAR(dot.item(), want, tol(7));
}

TEST(Matmul, HandlesEmptyAndZeroInnerSizes) {
  const Tensor z = ops::matmul(Tensor::zeros({3, 0}), Tensor::zeros({0, 4}));
  EXPECT_EQ(z.shape(), Shape({3, 4}));
  EXPECT_EQ(test::max_abs_diff(z, Tensor::zeros({3, 4})), 0.0);
  EXPECT_EQ(ops::matmul(Tensor::zeros({0, 5}), random_tensor({5, 2}, 1)).shape(), Shape({0, 2}));
  EXPECT_EQ(ops::matmul(Tensor::zeros({2, 0, 5}), random_tensor({5, 2}, 1)).shape(),
            Shape({2, 0, 2}));
}

TEST(Matmul, RejectsBadArguments) {
  const Tensor a = random_tensor({2, 3, 4}, 1);
  EXPECT_THROW(ops::matmul(a, random_tensor({5, 6}, 2)), Error);      // inner size
  EXPECT_THROW(ops::matmul(a, random_tensor({3, 4, 5}, 2)), Error);   // batch 2 vs 3
  EXPECT_THROW(ops::matmul(a, random_tensor({5}, 2)), Error);         // vector of wrong size
  EXPECT_THROW(ops::matmul(Tensor::full({}, 1.0), a), Error);         // 0-d
  EXPECT_THROW(ops::matmul(a, Tensor()), Error);                      // undefined
  EXPECT_THROW(ops::matmul(a.to(DType::F64), random_tensor({4, 2}, 3)), Error);
  EXPECT_THROW(ops::matmul(a, random_tensor({4, 2}, 3).to(DType::BF16)), Error);
  try {
    ops::matmul(a, random_tensor({5, 6}, 2));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul"), std::string::npos) << e.what();
  }
}

TEST(Linear, MatchesDoubleReferenceWithAndWithoutBias) {
  struct Case {
    Shape x;
    int64_t out;
  };
  const Case cases[] = {{{2, 7, 33}, 17}, {{129}, 3}, {{3, 1, 5, 7}, 1}, {{1, 1}, 129}};
  uint64_t seed = 30;
  for (const Case& c : cases) {
    const int64_t in = c.x[c.x.size() - 1];
    const Tensor x = random_tensor(c.x, seed++), w = random_tensor({c.out, in}, seed++),
                 b = random_tensor({c.out}, seed++);
    const Tensor y = ops::linear(x, w, b);
    Shape want_shape = c.x;
    want_shape[want_shape.size() - 1] = c.out;
    EXPECT_EQ(y.shape(), want_shape);
    SCOPED_TRACE(c.x.str());
    EXPECT_ALLCLOSE(y, ref_linear(x, w, b), tol(in));
    EXPECT_ALLCLOSE(ops::linear(x, w), ref_linear(x, w, Tensor()), tol(in));
  }
}

TEST(Linear, AcceptsNonContiguousInputs) {
  const int64_t rows = 33, in = 24, out = 7;
  const Tensor x = random_tensor({3, rows, in}, 40), w = random_tensor({out, in}, 41),
               b = random_tensor({out}, 42);
  const Tensor want = ref_linear(x, w, b);
  EXPECT_ALLCLOSE(ops::linear(non_contiguous_copy(x), w, b), want, tol(in));
  EXPECT_ALLCLOSE(ops::linear(x, non_contiguous_copy(w), b), want, tol(in));
  // A [in, out] buffer viewed as weight [out, in] (BLAS no-transpose path).
  const Tensor wt = w.transpose(0, 1).contiguous().transpose(0, 1);
  EXPECT_ALLCLOSE(ops::linear(x, wt, b), want, tol(in));
  // 2-D x that is a transposed view; strided bias.
  const Tensor x2 = x.select(0, 1), x2t = x2.transpose(0, 1).contiguous().transpose(0, 1);
  Tensor b_buf = Tensor::zeros({2 * out});
  const Tensor b_step = b_buf.slice(0, 0, 2 * out, 2);
  b_step.copy_from(b);
  EXPECT_ALLCLOSE(ops::linear(x2t, wt, b_step), ref_linear(x2, w, b), tol(in));
  // [B, T, H, D] -> [B, H, T, D] views flatten to a non-viewable layout (copied).
  const Tensor x4 = random_tensor({2, 5, 3, in}, 43).transpose(1, 2);
  EXPECT_ALLCLOSE(ops::linear(x4, w, b), ref_linear(x4.contiguous(), w, b), tol(in));
}

TEST(Linear, ZeroInputFeaturesGiveTheBias) {
  const Tensor b = random_tensor({4}, 50);
  const Tensor y = ops::linear(Tensor::zeros({3, 0}), Tensor::zeros({4, 0}), b);
  EXPECT_ALLCLOSE(y, b.unsqueeze(0).expand({3, 4}).contiguous(), 0.0);
  const Tensor y0 = ops::linear(Tensor::zeros({3, 0}), Tensor::zeros({4, 0}));
  EXPECT_ALLCLOSE(y0, Tensor::zeros({3, 4}), 0.0);
  EXPECT_EQ(ops::linear(Tensor::zeros({0, 5}), random_tensor({4, 5}, 1), b).shape(),
            Shape({0, 4}));
}

// On the CPU linear_gelu_tanh is exactly the two ops, and it checks its arguments as linear does.
TEST(Linear, GeluTanhIsLinearThenGelu) {
  const Tensor x = random_tensor({3, 9, 24}, 60), w = random_tensor({17, 24}, 61),
               b = random_tensor({17}, 62);
  EXPECT_EQ(ops::linear_gelu_tanh(x, w, b).to_float_vector(),
            ops::gelu_tanh(ops::linear(x, w, b)).to_float_vector());
  EXPECT_EQ(ops::linear_gelu_tanh(non_contiguous_copy(x), w).to_float_vector(),
            ops::gelu_tanh(ops::linear(x, w)).to_float_vector());
  EXPECT_THROW(ops::linear_gelu_tanh(x, random_tensor({3, 4}, 4), b), Error);
  EXPECT_THROW(ops::linear_gelu_tanh(x, w, random_tensor({4}, 5)), Error);
}

TEST(Linear, RejectsBadArguments) {
  const Tensor x = random_tensor({2, 5}, 1), w = random_tensor({3, 5}, 2), b = random_tensor({3}, 3);
  EXPECT_THROW(ops::linear(x, random_tensor({3, 4}, 4), b), Error);     // in mismatch
  EXPECT_THROW(ops::linear(x, random_tensor({5, 3}, 4), b), Error);     // [in, out] layout
  EXPECT_THROW(ops::linear(x, random_tensor({15}, 4), b), Error);       // 1-D weight
  EXPECT_THROW(ops::linear(x, w, random_tensor({4}, 5)), Error);        // bias size
  EXPECT_THROW(ops::linear(x, w, random_tensor({1, 3}, 5)), Error);     // 2-D bias
  EXPECT_THROW(ops::linear(Tensor::full({}, 1.0), w, b), Error);        // 0-d x
  EXPECT_THROW(ops::linear(x.to(DType::BF16), w, b), Error);
  EXPECT_THROW(ops::linear(x, w.to(DType::F16), b), Error);
  EXPECT_THROW(ops::linear(x, w, b.to(DType::F64)), Error);
  EXPECT_THROW(ops::linear(x, Tensor(), b), Error);
}

TEST(Blas, SingleThreadScopeNestsAndRestoresTheThreadCount) {
  const int before = openblas_get_num_threads();
  {
    cpu::BlasSingleThreadScope outer;
    EXPECT_EQ(openblas_get_num_threads(), 1);
    {
      cpu::BlasSingleThreadScope inner;
      EXPECT_EQ(openblas_get_num_threads(), 1);
    }
    EXPECT_EQ(openblas_get_num_threads(), 1);
  }
  EXPECT_EQ(openblas_get_num_threads(), before);
}

}  // namespace
}  // namespace ltx
