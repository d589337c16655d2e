// CUDA reductions, argmax and softmax against the CPU ops on the same inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/reduce.h"
#include "support/test_support.h"

namespace ltx::reduce_test {
namespace {

using ops::ReduceOp;
using test::kGpu;
using test::near;
using test::same_bytes;

Tensor gpu(const Tensor& t) { return t.to(kGpu); }

struct DimsCase {
  std::vector<int64_t> dims;
  bool keepdim;
};

TEST(CudaReduce, SumMeanAmaxAminVarStdMatchCpu) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({3, 7, 33, 5}, 1, -2.f, 3.f);
  const Tensor xg = test::non_contiguous_copy(gpu(x));
  const std::vector<DimsCase> cases = {{{}, false},     {{-1}, false},   {{2}, true},
                                       {{0, 2}, false}, {{1, 2}, true},  {{0, 1, 3}, false},
                                       {{1}, false},    {{0, 1, 2, 3}, true}};
  for (const DimsCase& c : cases) {
    SCOPED_TRACE("dims " + Dims(c.dims).str() + (c.keepdim ? " keepdim" : ""));
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Amax, ReduceOp::Amin}) {
      const Tensor want = ops::reduce(op, x, c.dims, c.keepdim);
      const Tensor got = ops::reduce(op, xg, c.dims, c.keepdim);
      EXPECT_EQ(got.device(), kGpu);
      // Sums accumulate in double on both sides: at most one f32 rounding apart.
      EXPECT_TRUE(near(got, want, 1e-6, 1e-6)) << static_cast<int>(op);
    }
    for (int64_t corr : {0, 1}) {
      EXPECT_TRUE(near(ops::var(xg, c.dims, corr, c.keepdim), ops::var(x, c.dims, corr, c.keepdim),
                       1e-6, 1e-6));
      EXPECT_TRUE(near(ops::std(xg, c.dims, corr, c.keepdim), ops::std(x, c.dims, corr, c.keepdim),
                       1e-6, 1e-6));
    }
  }
  // A long row (many blocks of partial sums).
  const Tensor big = test::random_tensor({2, 100003}, 2);
  EXPECT_TRUE(near(ops::sum(gpu(big), {1}), ops::sum(big, {1}), 1e-5, 1e-6));
  EXPECT_TRUE(near(ops::mean(gpu(big)), ops::mean(big), 1e-7, 1e-6));
}

TEST(CudaReduce, MaxMinPropagateNaNAndMeanOfNothingIsNaN) {
  LTX_REQUIRE_CUDA();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = test::random_tensor({4, 50}, 3);
  x.select(0, 1).narrow(0, 17, 1).fill(nan);
  x.select(1, 3).fill(nan);  // NaN in every row: column 3
  const Tensor xr = x.narrow(0, 0, 2);  // row 0: NaN at col 3 only; row 1: cols 3 and 17
  EXPECT_TRUE(same_bytes(ops::amax(gpu(xr), {1}), ops::amax(xr, {1})));
  EXPECT_TRUE(same_bytes(ops::amin(gpu(x), {0}), ops::amin(x, {0})));
  const Tensor empty = Tensor::zeros({3, 0}, DType::F32, kGpu);
  const std::vector<float> m = ops::mean(empty, {1}).to_float_vector();
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(ops::sum(empty, {1}).to_float_vector(), std::vector<float>(3, 0.f));
}

TEST(CudaReduce, LongAmaxAndAminSplitOverManyBlocksGiveTheSameBits) {
  LTX_REQUIRE_CUDA();
  // A whole-weight amax (one output, millions of values: the FP8 quantisers' scale) and a few
  // long rows take the split path; bf16 and strided inputs as the quantisers pass them.
  const Tensor w = test::random_tensor({1000, 4099}, 4, -3.f, 2.f);
  for (const Tensor& x : {w, w.to(DType::BF16)}) {
    const Tensor xg = gpu(x);
    // The CPU reduces f32 only; a max or min of bf16 values is one of them, exact in f32.
    const Tensor xf = x.to(DType::F32);
    const auto cpu = [&](const Tensor& r) { return r.to(x.dtype()); };
    EXPECT_TRUE(same_bytes(ops::amax(xg), cpu(ops::amax(xf))));
    EXPECT_TRUE(same_bytes(ops::amin(xg), cpu(ops::amin(xf))));
    EXPECT_TRUE(same_bytes(ops::amax(xg.narrow(0, 0, 3), {1}),
                           cpu(ops::amax(xf.narrow(0, 0, 3), {1}))));
    EXPECT_TRUE(same_bytes(ops::amin(test::non_contiguous_copy(xg)), cpu(ops::amin(xf))));
  }
  Tensor x = w.clone();
  x.select(0, 777).narrow(0, 4000, 1).fill(std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> m = ops::amax(gpu(x)).to_float_vector();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_TRUE(std::isnan(m[0])) << "one NaN among four million values still wins";
  EXPECT_TRUE(same_bytes(ops::amax(gpu(x), {1}), ops::amax(x, {1})));
}

TEST(CudaReduce, ArgmaxPicksTheFirstMaximumAndNaN) {
  LTX_REQUIRE_CUDA();
  // Values rounded to {-2, ..., 2} make ties common; two NaNs in one column of dim 1.
  std::vector<float> v = test::random_tensor({6, 300, 9}, 4).to_float_vector();
  for (float& f : v) f = std::round(f * 2.f);
  v[5 * 9 + 2] = std::numeric_limits<float>::quiet_NaN();
  v[40 * 9 + 2] = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from_vector(v, {6, 300, 9});
  for (int64_t dim : {0, 1, 2}) {
    for (bool keep : {false, true}) {
      const Tensor got = ops::argmax(gpu(x), dim, keep);
      EXPECT_EQ(got.dtype(), DType::I64);
      EXPECT_TRUE(same_bytes(got, ops::argmax(x, dim, keep))) << dim << keep;
    }
  }
}

TEST(CudaReduce, SoftmaxAndLogSoftmaxMatchCpu) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({3, 33, 129}, 5, -8.f, 8.f);
  for (int64_t dim : {-1, 1, 0}) {
    for (bool log : {false, true}) {
      SCOPED_TRACE("dim " + std::to_string(dim) + (log ? " log" : ""));
      const Tensor want = log ? ops::log_softmax(x, dim) : ops::softmax(x, dim);
      const Tensor xg = test::non_contiguous_copy(gpu(x));
      const Tensor got = log ? ops::log_softmax(xg, dim) : ops::softmax(xg, dim);
      EXPECT_TRUE(near(got, want, 1e-7, 2e-6));
    }
  }
  // -inf entries get probability 0; a long row.
  Tensor y = test::random_tensor({2, 5000}, 6, -20.f, 20.f);
  y.select(1, 7).fill(-std::numeric_limits<double>::infinity());
  EXPECT_TRUE(near(ops::softmax(gpu(y), -1), ops::softmax(y, -1), 1e-8, 2e-6));
}

TEST(CudaReduce, Bf16InputsGiveBf16Results) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({4, 257}, 7).to(DType::BF16);
  const Tensor xf = x.to(DType::F32);
  const Tensor s = ops::sum(gpu(x), {1});
  EXPECT_EQ(s.dtype(), DType::BF16);
  EXPECT_TRUE(same_bytes(s, ops::sum(xf, {1}).to(DType::BF16)));
  const Tensor p = ops::softmax(gpu(x), 1);
  EXPECT_EQ(p.dtype(), DType::BF16);
  EXPECT_TRUE(near(p, ops::softmax(xf, 1).to(DType::BF16), 1e-6, 1.0 / 128));
  EXPECT_TRUE(same_bytes(ops::argmax(gpu(x), 1), ops::argmax(xf, 1)));
}

}  // namespace
}  // namespace ltx::reduce_test
