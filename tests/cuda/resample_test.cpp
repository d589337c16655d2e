// CUDA interpolation against the CPU op (bit-identical in f32: same tables, same rounding).
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_test_util.h"
#include "ops/resample.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::same_bytes;

TEST(CudaResample, InterpolateIsBitIdenticalToCpu) {
  LTX_REQUIRE_CUDA();
  using M = ops::InterpMode;
  const Tensor x1 = test::random_tensor({2, 3, 7}, 1);
  const Tensor x2 = test::random_tensor({1, 4, 5, 9}, 2);
  const Tensor x3 = test::random_tensor({1, 2, 3, 5, 6}, 3);
  for (const Tensor& x : {x1, x2, x3}) {
    const Tensor xg = test::non_contiguous_copy(x.to(kGpu));
    for (M mode : {M::Nearest, M::NearestExact, M::Linear, M::Area}) {
      for (int64_t size : {1, 4, 11, 14}) {
        SCOPED_TRACE(x.describe() + " mode " + std::to_string(static_cast<int>(mode)) + " size " +
                     std::to_string(size));
        const Tensor got = ops::interpolate(xg, {size}, mode);
        EXPECT_EQ(got.device(), kGpu);
        EXPECT_TRUE(same_bytes(got, ops::interpolate(x, {size}, mode)));
        if (mode == M::Linear) {
          EXPECT_TRUE(same_bytes(ops::interpolate(xg, {size}, mode, true),
                                 ops::interpolate(x, {size}, mode, true)));
        }
      }
      EXPECT_TRUE(same_bytes(ops::interpolate_scale(xg, {2.0}, mode),
                             ops::interpolate_scale(x, {2.0}, mode)));
      EXPECT_TRUE(same_bytes(ops::interpolate_scale(xg, {0.7}, mode),
                             ops::interpolate_scale(x, {0.7}, mode)));
    }
  }
}

TEST(CudaResample, Bf16InterpolationKeepsItsDtype) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({1, 3, 4, 6}, 4).to(DType::BF16);
  const Tensor got = ops::interpolate(x.to(kGpu), {8, 12}, ops::InterpMode::Linear);
  EXPECT_EQ(got.dtype(), DType::BF16);
  EXPECT_TRUE(test::near(got, ops::interpolate(x.to(DType::F32), {8, 12}, ops::InterpMode::Linear),
                         1e-2, 1e-2));
}

TEST(CudaResample, DepthToSpaceRunsOnCuda) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({1, 24, 2, 3, 4}, 5);
  for (const std::vector<int64_t>& order :
       {std::vector<int64_t>{0, 1, 2}, std::vector<int64_t>{0, 2, 1}}) {
    const Tensor got = ops::depth_to_space(x.to(kGpu), {2, 2, 2}, order);
    EXPECT_TRUE(same_bytes(got, ops::depth_to_space(x, {2, 2, 2}, order)));
    EXPECT_TRUE(same_bytes(ops::space_to_depth(got, {2, 2, 2}, order), x));
  }
}

}  // namespace
}  // namespace ltx
