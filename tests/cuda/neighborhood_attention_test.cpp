// CUDA 3-D neighborhood attention against the CPU op.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

struct KernelCase {
  Shape grid;  // B, T, H, W, heads
  std::array<int64_t, 3> kernel;
  int64_t dim;
};

// [.., 3 * heads * D] bf16 on the GPU: q, k and v are its non-contiguous slices, as the decoder's
// fused qkv projection gives them.
Tensor fused_qkv(const KernelCase& c, uint64_t seed) {
  return test::random_tensor({c.grid[0], c.grid[1], c.grid[2], c.grid[3], 3 * c.grid[4] * c.dim},
                             seed)
      .to(DType::BF16)
      .to(kGpu);
}
Tensor qkv_part(const Tensor& fused, const KernelCase& c, int i) {
  const int64_t n = c.grid[4];
  return fused.narrow(4, i * n * c.dim, n * c.dim)
      .view({c.grid[0], c.grid[1], c.grid[2], c.grid[3], n, c.dim});
}
// fused_qkv and its q, k, v slices.
struct FusedQkv {
  Tensor fused, q, k, v;
};
FusedQkv fused_qkv_parts(const KernelCase& c, uint64_t seed) {
  FusedQkv t;
  t.fused = fused_qkv(c, seed);
  t.q = qkv_part(t.fused, c, 0);
  t.k = qkv_part(t.fused, c, 1);
  t.v = qkv_part(t.fused, c, 2);
  return t;
}
float default_scale(const KernelCase& c) { return 1.f / std::sqrt(static_cast<float>(c.dim)); }

// Runs kernel `which` on the slices of `fused` and compares with the f32 CPU op on the same bf16
// values; returns the GPU result.
Tensor expect_kernel_matches_cpu(const KernelCase& c, const Tensor& fused,
                                 cuda::NeighborhoodKernel which) {
  const float scale = default_scale(c);
  const Tensor got = cuda::neighborhood_attention_3d(
      qkv_part(fused, c, 0), qkv_part(fused, c, 1), qkv_part(fused, c, 2), c.kernel, scale, which);
  EXPECT_EQ(got.dtype(), DType::BF16);
  const Tensor f32 = fused.to(DType::F32).to(Device::cpu());
  const Tensor want = ops::neighborhood_attention_3d(qkv_part(f32, c, 0), qkv_part(f32, c, 1),
                                                     qkv_part(f32, c, 2), c.kernel,
                                                     static_cast<double>(scale));
  EXPECT_TRUE(near(got, want, 2e-2, 2e-2))
      << "grid " << c.grid[1] << "x" << c.grid[2] << "x" << c.grid[3] << " kernel " << c.kernel[0]
      << "x" << c.kernel[1] << "x" << c.kernel[2] << " dim " << c.dim;
  return got;
}

// The tensor-core kernel (bf16) against the f32 CPU op on the same bf16-rounded inputs: window
// shapes of the LTX-2.5 decoder (3x7x7, 3x5x5, 11^3), kernels longer than an axis, partial block
// tiles at every border, q/k/v as non-contiguous slices of one fused projection, head dims 32-128.
TEST(CudaNeighborhoodAttention, TensorCoreKernelMatchesCpu) {
  LTX_REQUIRE_CUDA();
  const KernelCase cases[] = {{{1, 12, 13, 21, 2}, {11, 11, 11}, 64},
                              {{2, 5, 11, 17, 2}, {3, 7, 7}, 64},
                              {{1, 7, 9, 10, 3}, {3, 5, 5}, 128},
                              {{1, 3, 6, 19, 1}, {5, 11, 4}, 32},
                              {{1, 1, 1, 9, 2}, {3, 3, 3}, 64}};
  uint64_t seed = 100;
  for (const KernelCase& c : cases) {
    const FusedQkv t = fused_qkv_parts(c, seed++);
    const Tensor &fused = t.fused, &q = t.q, &k = t.k, &v = t.v;
    ASSERT_TRUE(cuda::tensor_core_neighborhood_attention_applies(q, k, v, c.kernel));
    const Tensor got = expect_kernel_matches_cpu(c, fused, cuda::NeighborhoodKernel::TensorCore);
    // The op's automatic choice: the wgmma kernel where it applies (Hopper, head dim 64), else
    // the tensor-core kernel, bit for bit.
    const Tensor autod = ops::neighborhood_attention_3d(q, k, v, c.kernel,
                                                        static_cast<double>(default_scale(c)));
    const Tensor want = cuda::wgmma_neighborhood_attention_applies(q, k, v, c.kernel)
                            ? cuda::neighborhood_attention_3d(q, k, v, c.kernel, default_scale(c),
                                                              cuda::NeighborhoodKernel::Wgmma)
                            : got;
    EXPECT_TRUE(test::same_bytes(autod, want));
  }
}

// The Hopper wgmma kernel (head dim 64) on the tensor-core test's shapes and more: planes of one
// (3x5x5: 8x8 keys) and two sub-tiles (11^3: 13x14 and 14x14 keys, 3x11x9: 14x12), kernels
// clamped to short axes, T not a multiple of the block's 8 planes (a second consumer warpgroup
// with partial or no queries), batches of two.
const std::vector<KernelCase>& wgmma_cases() {
  static const std::vector<KernelCase> cases = {{{1, 12, 13, 21, 2}, {11, 11, 11}, 64},
                                                {{1, 19, 17, 18, 1}, {11, 11, 11}, 64},
                                                {{2, 5, 11, 17, 2}, {3, 7, 7}, 64},
                                                {{1, 7, 9, 10, 3}, {3, 5, 5}, 64},
                                                {{1, 3, 6, 19, 1}, {5, 11, 4}, 64},
                                                {{1, 1, 1, 9, 2}, {3, 3, 3}, 64},
                                                {{1, 9, 7, 11, 1}, {11, 11, 11}, 64},
                                                {{2, 10, 15, 13, 1}, {3, 11, 9}, 64},
                                                {{1, 4, 5, 6, 2}, {1, 1, 1}, 64}};
  return cases;
}

TEST(CudaNeighborhoodAttention, WgmmaKernelMatchesCpu) {
  LTX_REQUIRE_WGMMA();
  uint64_t seed = 200;
  for (const KernelCase& c : wgmma_cases()) {
    const FusedQkv t = fused_qkv_parts(c, seed++);
    const Tensor &fused = t.fused, &q = t.q, &k = t.k, &v = t.v;
    ASSERT_TRUE(cuda::wgmma_neighborhood_attention_applies(q, k, v, c.kernel))
        << c.kernel[0] << "x" << c.kernel[1] << "x" << c.kernel[2];
    const Tensor got = expect_kernel_matches_cpu(c, fused, cuda::NeighborhoodKernel::Wgmma);
    // The tensor-core kernel on the same inputs: same numerics (P rounded to bf16), close results.
    const Tensor tc = cuda::neighborhood_attention_3d(q, k, v, c.kernel, default_scale(c),
                                                      cuda::NeighborhoodKernel::TensorCore);
    EXPECT_TRUE(near(got, tc, 1e-2, 1e-2));
  }
}

// The wgmma kernel (the window rule as a fifth Q K^T k-step) on longer T: 7^3 over 30 planes
// (104-key planes), 3^3 over 21 (64 keys), 11^3 over 17 (two sub-tiles a plane, and a last block
// whose second consumer has no queries), the stage-2 decoder's 3x7x7 over 18 planes (104 keys) on
// a small H x W, against the CPU op and the tensor-core kernel. Large scales (peaked softmax)
// check that the masked logits' bias still vanishes.
TEST(CudaNeighborhoodAttention, WgmmaKernelOnLongAxesMatchesCpuAndTheTensorCoreKernel) {
  LTX_REQUIRE_WGMMA();
  std::vector<KernelCase> cases = wgmma_cases();
  cases.push_back({{1, 30, 9, 9, 1}, {7, 7, 7}, 64});
  cases.push_back({{2, 21, 6, 7, 1}, {3, 3, 3}, 64});
  cases.push_back({{1, 17, 14, 14, 1}, {11, 11, 11}, 64});
  cases.push_back({{1, 18, 10, 12, 2}, {3, 7, 7}, 64});
  uint64_t seed = 400;
  for (const KernelCase& c : cases) {
    const FusedQkv t = fused_qkv_parts(c, seed++);
    const Tensor &fused = t.fused, &q = t.q, &k = t.k, &v = t.v;
    ASSERT_TRUE(cuda::wgmma_neighborhood_attention_applies(q, k, v, c.kernel));
    const Tensor got = expect_kernel_matches_cpu(c, fused, cuda::NeighborhoodKernel::Wgmma);
    const Tensor tc = cuda::neighborhood_attention_3d(q, k, v, c.kernel, default_scale(c),
                                                      cuda::NeighborhoodKernel::TensorCore);
    EXPECT_TRUE(near(got, tc, 1e-2, 1e-2));
    for (const float scale : {2.f, 8.f}) {
      const Tensor hot_tc = cuda::neighborhood_attention_3d(q, k, v, c.kernel, scale,
                                                            cuda::NeighborhoodKernel::TensorCore);
      EXPECT_TRUE(near(cuda::neighborhood_attention_3d(q, k, v, c.kernel, scale,
                                                       cuda::NeighborhoodKernel::Wgmma),
                       hot_tc, 1e-2, 1e-2))
          << "scale " << scale;
    }
  }
  // Query columns (the key boxes start at the first column's window).
  const KernelCase c{{1, 9, 13, 26, 2}, {11, 11, 11}, 64};
  const FusedQkv t = fused_qkv_parts(c, seed++);
  const Tensor &q = t.q, &k = t.k, &v = t.v;
  for (const ops::QueryColumns cols : {ops::QueryColumns{5, 16}, ops::QueryColumns{23, 3}}) {
    const Tensor tc = cuda::neighborhood_attention_3d(q, k, v, c.kernel, 0.125f,
                                                      cuda::NeighborhoodKernel::TensorCore, cols);
    const Tensor got = cuda::neighborhood_attention_3d(q, k, v, c.kernel, 0.125f,
                                                       cuda::NeighborhoodKernel::Wgmma, cols);
    ASSERT_EQ(got.shape(), tc.shape());
    EXPECT_TRUE(near(got, tc, 1e-2, 1e-2)) << cols.begin << "+" << cols.count;
  }
}

// Query columns: the wgmma kernel computes only those (its W tiles start at the first one, so
// the blocks' key boxes move: close to, not bit-equal with, the full output's columns); the
// other kernels compute everything and keep the columns (same bits). Against the CPU op too.
TEST(CudaNeighborhoodAttention, QueryColumnsMatchTheFullOutput) {
  LTX_REQUIRE_CUDA();
  const KernelCase cases[] = {{{1, 9, 13, 26, 2}, {11, 11, 11}, 64},
                              {{2, 5, 11, 17, 1}, {3, 7, 7}, 64}};
  uint64_t seed = 300;
  for (const KernelCase& c : cases) {
    const FusedQkv t = fused_qkv_parts(c, seed++);
    const Tensor &q = t.q, &k = t.k, &v = t.v;
    const int64_t w = q.size(3);
    for (const ops::QueryColumns cols : {ops::QueryColumns{5, w - 10}, ops::QueryColumns{0, 3},
                                         ops::QueryColumns{w - 6, 6}, ops::QueryColumns{7, 1}}) {
      SCOPED_TRACE(std::to_string(cols.begin) + "+" + std::to_string(cols.count));
      const Tensor full = ops::neighborhood_attention_3d(q, k, v, c.kernel, 0.125);
      const Tensor part = ops::neighborhood_attention_3d(q, k, v, c.kernel, 0.125, cols);
      const Tensor want = full.narrow(3, cols.begin, cols.count).contiguous();
      ASSERT_EQ(part.shape(), want.shape());
      EXPECT_TRUE(near(part, want, 1e-2, 1e-2));
      const Tensor cpu = ops::neighborhood_attention_3d(q.to(Device::cpu()).to(DType::F32),
                                                        k.to(Device::cpu()).to(DType::F32),
                                                        v.to(Device::cpu()).to(DType::F32),
                                                        c.kernel, 0.125, cols);
      EXPECT_TRUE(near(part, cpu, 2e-2, 2e-2));
      const Tensor tc = cuda::neighborhood_attention_3d(q, k, v, c.kernel, 0.125f,
                                                        cuda::NeighborhoodKernel::TensorCore, cols);
      EXPECT_TRUE(test::same_bytes(
          tc, cuda::neighborhood_attention_3d(q, k, v, c.kernel, 0.125f,
                                              cuda::NeighborhoodKernel::TensorCore)
                  .narrow(3, cols.begin, cols.count)
                  .contiguous()));
    }
  }
}

TEST(CudaNeighborhoodAttention, WgmmaKernelRefusesWhatItCannotTake) {
  LTX_REQUIRE_CUDA();
  const Tensor q128 = Tensor::empty({1, 3, 3, 3, 1, 128}, DType::BF16, kGpu);
  EXPECT_FALSE(cuda::wgmma_neighborhood_attention_applies(q128, q128, q128, {3, 3, 3}));
  EXPECT_THROW(cuda::neighborhood_attention_3d(q128, q128, q128, {3, 3, 3}, 1.f,
                                               cuda::NeighborhoodKernel::Wgmma),
               Error);
  // A (4 + 15 - 1)^2 = 324-key plane is more than the kernel's 208 keys.
  const Tensor big = Tensor::empty({1, 2, 20, 20, 1, 64}, DType::BF16, kGpu);
  EXPECT_FALSE(cuda::wgmma_neighborhood_attention_applies(big, big, big, {3, 15, 15}));
  const Tensor f = Tensor::empty({1, 3, 3, 3, 1, 64}, DType::F32, kGpu);
  EXPECT_FALSE(cuda::wgmma_neighborhood_attention_applies(f, f, f, {3, 3, 3}));
  // Auto: head dim 128 goes to the tensor-core kernel (same bits); head dim 64 to the wgmma one
  // where the GPU has it.
  const Tensor x128 = test::random_tensor({1, 4, 5, 6, 2, 128}, 8).to(DType::BF16).to(kGpu);
  EXPECT_TRUE(test::same_bytes(
      cuda::neighborhood_attention_3d(x128, x128, x128, {3, 3, 3}, 0.125f),
      cuda::neighborhood_attention_3d(x128, x128, x128, {3, 3, 3}, 0.125f,
                                      cuda::NeighborhoodKernel::TensorCore)));
  const Tensor x = test::random_tensor({1, 4, 5, 6, 2, 64}, 7).to(DType::BF16).to(kGpu);
  const bool hopper = cuda::wgmma_neighborhood_attention_applies(x, x, x, {3, 3, 3});
  EXPECT_TRUE(test::same_bytes(
      cuda::neighborhood_attention_3d(x, x, x, {3, 3, 3}, 0.125f),
      cuda::neighborhood_attention_3d(x, x, x, {3, 3, 3}, 0.125f,
                                      hopper ? cuda::NeighborhoodKernel::Wgmma
                                             : cuda::NeighborhoodKernel::TensorCore)));
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
