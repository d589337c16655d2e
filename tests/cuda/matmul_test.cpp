// CUDA matmul (torch.matmul semantics) against the CPU op.
#include <gtest/gtest.h>

#include <vector>

#include <tuple>

#include "cuda/cuda_test_util.h"
#include "ops/linalg.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::near;

TEST(CudaMatmul, MatchesCpuForEveryRankCombination) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{7}, {7}},          {{7}, {7, 5}},           {{3, 7}, {7}},       {{3, 7}, {7, 5}},
      {{2, 3, 7}, {7, 5}}, {{2, 3, 7}, {2, 7, 5}},  {{7}, {4, 7, 5}},    {{2, 1, 3, 7}, {4, 7, 1}},
      {{4, 3, 7}, {7}},    {{1, 33, 129}, {129, 3}}};
  for (const auto& [sa, sb] : cases) {
    const Tensor a = test::random_tensor(sa, seed++), b = test::random_tensor(sb, seed++);
    const Tensor want = ops::matmul(a, b);
    const Tensor got = ops::matmul(a.to(kGpu), b.to(kGpu));
    EXPECT_EQ(got.device(), kGpu);
    EXPECT_TRUE(near(got, want, 1e-5, 1e-5)) << a.describe() << " @ " << b.describe();
  }
  const Tensor a = test::random_tensor({5, 6}, 90), b = test::random_tensor({6, 4}, 91);
  EXPECT_TRUE(near(ops::matmul(test::non_contiguous_copy(a.to(kGpu)), b.to(kGpu)),
                   ops::matmul(a, b), 1e-5, 1e-5));
  EXPECT_THROW(ops::matmul(a.to(kGpu), b), Error);
}

// Plain f32 inputs (products not exact), sizes around the kernel's 64 x 64 tiles and 16-wide K
// steps, a transposed view: the GPU's in-order sums are the CPU's bit for bit.
TEST(CudaMatmulInOrder, IsBitForBitTheCpu) {
  LTX_REQUIRE_CUDA();
  for (const auto& [m, k, n] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {65, 17, 130}, {64, 16, 64}, {200, 384, 70}, {3, 0, 5}, {7, 33, 1}}) {
    const Tensor a = test::random_tensor({m, k}, 7 + m);
    const Tensor b = test::random_tensor({n, k}, 9 + n).transpose(0, 1);
    const Tensor want = ops::matmul_in_order(a, b);
    const Tensor got = ops::matmul_in_order(a.to(kGpu), b.to(kGpu));
    EXPECT_EQ(got.device(), kGpu);
    EXPECT_TRUE(test::same_bytes(got, want)) << m << "x" << k << "x" << n;
  }
}

}  // namespace
}  // namespace ltx
