// CUDA RMSNorm / LayerNorm against the CPU ops on the same inputs.
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_test_util.h"
#include "ops/norm.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::near;

Tensor gpu(const Tensor& t) { return t.to(kGpu); }
Tensor gpu_or_none(const Tensor& t) { return t.defined() ? t.to(kGpu) : Tensor(); }

TEST(CudaNorm, RmsNormAndLayerNormMatchCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (int64_t d : {1, 7, 33, 129, 2048, 4100}) {
    for (int64_t rows : {1, 5, 64}) {
      SCOPED_TRACE("rows " + std::to_string(rows) + " d " + std::to_string(d));
      const Tensor x = test::random_tensor({rows, d}, seed++, -3.f, 5.f);
      const Tensor w = test::random_tensor({d}, seed++), b = test::random_tensor({d}, seed++);
      const Tensor xg = test::non_contiguous_copy(gpu(x));
      for (const Tensor& wt : {w, Tensor()}) {
        const Tensor got = ops::rms_norm(xg, gpu_or_none(wt), 1e-6);
        EXPECT_EQ(got.device(), kGpu);
        // f32 partial sums vs the CPU's double: the row's scale differs by ~1e-7 relative.
        EXPECT_TRUE(near(got, ops::rms_norm(x, wt, 1e-6), 1e-6, 2e-6));
        for (const Tensor& bt : {b, Tensor()})
          EXPECT_TRUE(near(ops::layer_norm(xg, gpu_or_none(wt), gpu_or_none(bt), 1e-5),
                           ops::layer_norm(x, wt, bt, 1e-5), 1e-5, 2e-6));
      }
    }
  }
}

TEST(CudaNorm, ThreeDimInputsAndLargeOffsets) {
  LTX_REQUIRE_CUDA();
  // The transformer's [B, T, D] streams. A mean of 1e4 with a spread of 1: a plain f32 sum for
  // the mean is off by ~1e-3 there (2e-3 in the output); the shifted sum keeps the mean exact to
  // f32 rounding, like the CPU's double sum.
  const Tensor x = test::random_tensor({2, 37, 96}, 10, 9999.f, 10001.f);
  EXPECT_TRUE(near(ops::layer_norm(gpu(x), Tensor(), Tensor(), 1e-6),
                   ops::layer_norm(x, Tensor(), Tensor(), 1e-6), 1e-4, 1e-5));
  EXPECT_TRUE(near(ops::rms_norm(gpu(x), Tensor(), 1e-6), ops::rms_norm(x, Tensor(), 1e-6), 1e-6,
                   2e-6));
}

TEST(CudaNorm, PixelNormAndGroupNormMatchCpu) {
  LTX_REQUIRE_CUDA();
  // [N, C, D, H, W] as in the video VAE; PixelNorm over channels (dim 1) and the last dim.
  const Tensor x = test::random_tensor({2, 6, 3, 5, 7}, 30, -2.f, 4.f);
  const Tensor xg = test::non_contiguous_copy(gpu(x));
  for (int64_t dim : {1, -1, 0}) {
    EXPECT_TRUE(near(ops::rms_norm_dim(xg, dim, 1e-8), ops::rms_norm_dim(x, dim, 1e-8), 1e-7,
                     1e-6))
        << dim;
  }
  const Tensor w = test::random_tensor({6}, 31), b = test::random_tensor({6}, 32);
  for (int64_t groups : {1, 2, 3, 6}) {
    for (const Tensor& wt : {w, Tensor()}) {
      for (const Tensor& bt : {b, Tensor()}) {
        EXPECT_TRUE(near(ops::group_norm(xg, groups, gpu_or_none(wt), gpu_or_none(bt), 1e-6),
                         ops::group_norm(x, groups, wt, bt, 1e-6), 1e-6, 1e-6))
            << groups;
      }
    }
  }
  // A large group (one block reduces 2 x 300k elements).
  const Tensor big = test::random_tensor({1, 4, 300000}, 33, 5.f, 7.f);
  EXPECT_TRUE(near(ops::group_norm(gpu(big), 2, Tensor(), Tensor(), 1e-6),
                   ops::group_norm(big, 2, Tensor(), Tensor(), 1e-6), 1e-5, 1e-5));
}

TEST(CudaNorm, Bf16StorageKeepsItsDtype) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({9, 300}, 20).to(DType::BF16);
  const Tensor w = test::random_tensor({300}, 21).to(DType::BF16);
  const Tensor got = ops::rms_norm(gpu(x), gpu(w), 1e-6);
  EXPECT_EQ(got.dtype(), DType::BF16);
  EXPECT_TRUE(near(got, ops::rms_norm(x.to(DType::F32), w.to(DType::F32), 1e-6).to(DType::BF16),
                   1e-6, 1.0 / 128));
  // f32 x with a bf16 weight stays f32.
  const Tensor xf = test::random_tensor({9, 300}, 22);
  EXPECT_EQ(ops::rms_norm(gpu(xf), gpu(w), 1e-6).dtype(), DType::F32);
}

TEST(CudaNorm, RejectsBadArguments) {
  LTX_REQUIRE_CUDA();
  const Tensor x = Tensor::zeros({2, 8}, DType::F32, kGpu);
  EXPECT_ERROR_HAS(ops::rms_norm(x, Tensor::zeros({7}, DType::F32, kGpu), 1e-6), "shape [8]");
  EXPECT_ERROR_HAS(ops::rms_norm(x, Tensor::zeros({8}), 1e-6), "different devices");
  EXPECT_ERROR_HAS(ops::layer_norm(x.to(DType::F16), Tensor(), Tensor(), 1e-6), "f32 or bf16");
}

}  // namespace
}  // namespace ltx
