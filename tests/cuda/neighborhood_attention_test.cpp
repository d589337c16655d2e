// CUDA 3-D neighborhood attention against the CPU op.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cuda/neighborhood_attention.h"
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

// The tensor-core kernel (bf16) against the f32 CPU op on the same bf16-rounded inputs: window
// shapes of the LTX-2.5 decoder (3x7x7, 3x5x5, 11^3), kernels longer than an axis, partial block
// tiles at every border, q/k/v as non-contiguous slices of one fused projection, head dims 32-128.
TEST(CudaNeighborhoodAttention, TensorCoreKernelMatchesCpu) {
  LTX_REQUIRE_CUDA();
  struct Case {
    Shape grid;  // B, T, H, W, heads
    std::array<int64_t, 3> kernel;
    int64_t dim;
  };
  const Case cases[] = {{{1, 12, 13, 21, 2}, {11, 11, 11}, 64},
                        {{2, 5, 11, 17, 2}, {3, 7, 7}, 64},
                        {{1, 7, 9, 10, 3}, {3, 5, 5}, 128},
                        {{1, 3, 6, 19, 1}, {5, 11, 4}, 32},
                        {{1, 1, 1, 9, 2}, {3, 3, 3}, 64}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    const int64_t b = c.grid[0], t = c.grid[1], h = c.grid[2], w = c.grid[3], n = c.grid[4];
    // [.., 3 * heads * D]: q, k, v are strided views, as the decoder's fused qkv gives them.
    const Tensor fused =
        test::random_tensor({b, t, h, w, 3 * n * c.dim}, seed++).to(DType::BF16).to(kGpu);
    auto part = [&](int i) {
      return fused.narrow(4, i * n * c.dim, n * c.dim).view({b, t, h, w, n, c.dim});
    };
    const float scale = 1.f / std::sqrt(static_cast<float>(c.dim));
    ASSERT_TRUE(
        cuda::tensor_core_neighborhood_attention_applies(part(0), part(1), part(2), c.kernel));
    const Tensor got = cuda::neighborhood_attention_3d(part(0), part(1), part(2), c.kernel, scale,
                                                       cuda::NeighborhoodKernel::TensorCore);
    ASSERT_EQ(got.dtype(), DType::BF16);
    const Tensor f32 = fused.to(DType::F32).to(Device::cpu());
    auto cpu_part = [&](int i) {
      return f32.narrow(4, i * n * c.dim, n * c.dim).view({b, t, h, w, n, c.dim});
    };
    const Tensor want = ops::neighborhood_attention_3d(cpu_part(0), cpu_part(1), cpu_part(2),
                                                       c.kernel, static_cast<double>(scale));
    EXPECT_TRUE(near(got, want, 2e-2, 2e-2)) << "kernel "
                                             << c.kernel[0] << "x" << c.kernel[1] << "x"
                                             << c.kernel[2] << " dim " << c.dim;
    // The op's automatic choice is the tensor-core kernel: same bits.
    const Tensor autod = ops::neighborhood_attention_3d(part(0), part(1), part(2), c.kernel,
                                                        static_cast<double>(scale));
    EXPECT_TRUE(test::same_bytes(autod, got));
  }
}

TEST(CudaNeighborhoodAttention, TensorCoreKernelRefusesWhatItCannotTake) {
  LTX_REQUIRE_CUDA();
  const Tensor q = test::random_tensor({1, 3, 3, 3, 1, 48}, 1).to(DType::BF16).to(kGpu);
  EXPECT_FALSE(cuda::tensor_core_neighborhood_attention_applies(q, q, q, {3, 3, 3}));  // head dim 48
  EXPECT_THROW(cuda::neighborhood_attention_3d(q, q, q, {3, 3, 3}, 1.f,
                                               cuda::NeighborhoodKernel::TensorCore),
               Error);
  const Tensor f = test::random_tensor({1, 3, 3, 3, 1, 64}, 2).to(kGpu);
  EXPECT_FALSE(cuda::tensor_core_neighborhood_attention_applies(f, f, f, {3, 3, 3}));  // f32
}

}  // namespace
}  // namespace ltx
