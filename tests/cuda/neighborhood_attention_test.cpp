// CUDA 3-D neighborhood attention against the CPU op.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "ops/neighborhood_attention.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::near;

TEST(CudaNeighborhoodAttention, MatchesCpuWithBorderWindows) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (const std::array<int64_t, 3>& kernel :
       {std::array<int64_t, 3>{3, 3, 3}, std::array<int64_t, 3>{1, 5, 2},
        std::array<int64_t, 3>{9, 9, 9}}) {
    const Tensor q = test::random_tensor({2, 4, 5, 6, 3, 33}, seed++);
    const Tensor k = test::random_tensor({2, 4, 5, 6, 3, 33}, seed++);
    const Tensor v = test::random_tensor({2, 4, 5, 6, 3, 40}, seed++);
    const Tensor want = ops::neighborhood_attention_3d(q, k, v, kernel);
    const Tensor got = ops::neighborhood_attention_3d(test::non_contiguous_copy(q.to(kGpu)),
                                                      k.to(kGpu), v.to(kGpu), kernel);
    EXPECT_EQ(got.device(), kGpu);
    EXPECT_TRUE(near(got, want, 1e-5, 1e-4));
    const Tensor gotb = ops::neighborhood_attention_3d(
        q.to(kGpu).to(DType::BF16), k.to(kGpu).to(DType::BF16), v.to(kGpu).to(DType::BF16), kernel,
        0.5);
    EXPECT_EQ(gotb.dtype(), DType::BF16);
    EXPECT_TRUE(near(gotb,
                     ops::neighborhood_attention_3d(q.to(DType::BF16).to(DType::F32),
                                                    k.to(DType::BF16).to(DType::F32),
                                                    v.to(DType::BF16).to(DType::F32), kernel, 0.5),
                     2e-2, 2e-2));
  }
}

}  // namespace
}  // namespace ltx
