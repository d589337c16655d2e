// CUDA convolutions against the CPU ops on the same random inputs.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "backend/cpu/conv.h"
#include "backend/cuda/conv.h"
#include "cuda/cuda_test_util.h"
#include "ops/conv.h"
#include "support/test_support.h"

namespace ltx::conv_test {
namespace {

using test::kGpu;
using test::near;

Tensor gpu(const Tensor& t) { return t.defined() ? t.to(kGpu) : Tensor(); }

// f32 GEMM (no TF32) vs OpenBLAS: only the summation order differs.
constexpr double kAtol = 1e-4, kRtol = 1e-4;

TEST(CudaConv, Conv1dMatchesCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 100;
  struct Case {
    int64_t n, c, o, l, k, s, p, d, g;
  };
  for (const Case& c : {Case{1, 3, 5, 33, 3, 1, 1, 1, 1}, Case{2, 4, 6, 129, 7, 2, 3, 2, 2},
                        Case{1, 8, 8, 17, 5, 1, 2, 1, 8}, Case{2, 16, 7, 7, 1, 1, 0, 1, 1},
                        Case{1, 6, 9, 40, 4, 3, 0, 3, 3}}) {
    SCOPED_TRACE("c " + std::to_string(c.c) + " o " + std::to_string(c.o) + " k " +
                 std::to_string(c.k) + " g " + std::to_string(c.g));
    const Tensor x = test::random_tensor({c.n, c.c, c.l}, seed++);
    const Tensor w = test::random_tensor({c.o, c.c / c.g, c.k}, seed++);
    const Tensor b = test::random_tensor({c.o}, seed++);
    for (const Tensor& bt : {b, Tensor()}) {
      const Tensor want = ops::conv1d(x, w, bt, {c.s}, {c.p}, {c.d}, c.g);
      const Tensor got =
          ops::conv1d(test::non_contiguous_copy(gpu(x)), gpu(w), gpu(bt), {c.s}, {c.p}, {c.d}, c.g);
      EXPECT_EQ(got.device(), kGpu);
      EXPECT_TRUE(near(got, want, kAtol, kRtol));
    }
  }
}

TEST(CudaConv, Conv2dAndConv3dMatchCpu) {
  LTX_REQUIRE_CUDA();
  const Tensor x2 = test::random_tensor({2, 6, 13, 9}, 1);
  const Tensor w2 = test::random_tensor({4, 3, 3, 2}, 2), b2 = test::random_tensor({4}, 3);
  EXPECT_TRUE(near(ops::conv2d(gpu(x2), gpu(w2), gpu(b2), {2, 1}, {1, 0}, {1, 2}, 2),
                   ops::conv2d(x2, w2, b2, {2, 1}, {1, 0}, {1, 2}, 2), kAtol, kRtol));
  // The video VAE's 3x3x3 conv with a causal (replicate) front pad done by pad().
  const Tensor x3 = test::random_tensor({1, 5, 4, 7, 6}, 4);
  const Tensor w3 = test::random_tensor({7, 5, 3, 3, 3}, 5), b3 = test::random_tensor({7}, 6);
  EXPECT_TRUE(near(ops::conv3d(test::non_contiguous_copy(gpu(x3)), gpu(w3), gpu(b3), {1, 1, 1},
                               {0, 1, 1}),
                   ops::conv3d(x3, w3, b3, {1, 1, 1}, {0, 1, 1}), kAtol, kRtol));
  EXPECT_TRUE(near(ops::conv3d(gpu(x3), gpu(w3), Tensor(), {2, 2, 1}, {1, 1, 1}, {1, 2, 1}),
                   ops::conv3d(x3, w3, Tensor(), {2, 2, 1}, {1, 1, 1}, {1, 2, 1}), kAtol, kRtol));
  // 1x1x1 (channel mixing) with two batch items.
  const Tensor x1 = test::random_tensor({2, 33, 3, 4, 5}, 7);
  const Tensor w1 = test::random_tensor({3, 33, 1, 1, 1}, 8);
  EXPECT_TRUE(
      near(ops::conv3d(gpu(x1), gpu(w1)), ops::conv3d(x1, w1), kAtol, kRtol));
}

TEST(CudaConv, ConvTranspose1dMatchesCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 200;
  struct Case {
    int64_t c, o, l, k, s, p, op, d, g;
  };
  // The vocoder's upsamplers are stride s, kernel 2s, padding s/2 (e.g. 10/20/5... scaled down).
  // Padding beyond dilation * (k - 1) crops the equivalent forward conv's input (negative pad);
  // output_padding may reach the dilation when it exceeds the stride. (Every case must have a
  // positive output length, else the CPU op throws first.)
  for (const Case& c : {Case{4, 6, 9, 4, 2, 1, 0, 1, 1}, Case{6, 4, 7, 11, 5, 3, 0, 1, 1},
                        Case{4, 4, 5, 3, 1, 0, 0, 1, 2}, Case{6, 9, 8, 3, 3, 4, 2, 2, 3},
                        Case{3, 2, 1, 5, 2, 1, 1, 1, 1}, Case{3, 2, 9, 3, 2, 3, 1, 1, 1},
                        Case{4, 4, 6, 3, 1, 1, 1, 2, 2}, Case{5, 5, 7, 12, 2, 0, 0, 1, 5}}) {
    SCOPED_TRACE("c " + std::to_string(c.c) + " o " + std::to_string(c.o) + " l " +
                 std::to_string(c.l) + " k " + std::to_string(c.k) + " s " + std::to_string(c.s) +
                 " p " + std::to_string(c.p) + " op " + std::to_string(c.op) + " d " +
                 std::to_string(c.d) + " g " + std::to_string(c.g));
    const Tensor x = test::random_tensor({2, c.c, c.l}, seed++);
    const Tensor w = test::random_tensor({c.c, c.o / c.g, c.k}, seed++);
    const Tensor b = test::random_tensor({c.o}, seed++);
    for (const Tensor& bt : {b, Tensor()}) {
      const Tensor want = ops::conv_transpose1d(x, w, bt, {c.s}, {c.p}, {c.op}, c.g, {c.d});
      const Tensor got =
          ops::conv_transpose1d(gpu(x), gpu(w), gpu(bt), {c.s}, {c.p}, {c.op}, c.g, {c.d});
      EXPECT_EQ(got.device(), kGpu);
      EXPECT_TRUE(near(got, want, kAtol, kRtol));
    }
  }
}

TEST(CudaConv, ConvTranspose1dWithABroadcastDepthwiseFilterMatchesCpu) {
  LTX_REQUIRE_CUDA();
  // The vocoder's anti-aliased activations: one [1, 1, 12] filter expanded (stride 0) to every
  // channel, groups = channels, stride 2, on a non-contiguous input; and the BWE's odd filter.
  for (const int64_t k : {12, 43}) {
    const int64_t c = 6, s = k == 12 ? 2 : 3;
    const Tensor x = test::random_tensor({1, c, 29}, 300 + k);
    const Tensor f = test::random_tensor({1, 1, k}, 400 + k);
    const Tensor want = ops::conv_transpose1d(x, f.expand({c, 1, k}), {}, {s}, {0}, {0}, c);
    const Tensor got = ops::conv_transpose1d(test::non_contiguous_copy(gpu(x)),
                                             gpu(f).expand({c, 1, k}), {}, {s}, {0}, {0}, c);
    EXPECT_TRUE(near(got, want, kAtol, kRtol)) << "kernel " << k;
  }
}

TEST(CudaConv, ConvTransposeBackendMatchesCpuInTwoAndThreeDims) {
  LTX_REQUIRE_CUDA();
  // No conv_transpose2d/3d op yet: the rank-generic op, same spec, on both devices.
  struct Case {
    int rank;
    Shape x, w;
    std::array<int64_t, 3> s, p, op, d;
    int64_t g;
  };
  const Case cases[] = {
      {2, {2, 4, 5, 6}, {4, 3, 3, 2}, {2, 1, 1}, {1, 0, 0}, {1, 0, 0}, {1, 2, 1}, 1},
      {2, {1, 6, 4, 7}, {6, 2, 4, 3}, {3, 2, 1}, {2, 3, 0}, {2, 1, 0}, {1, 1, 1}, 3},
      {3, {1, 4, 3, 4, 5}, {4, 3, 3, 3, 2}, {1, 2, 2}, {1, 1, 0}, {0, 1, 1}, {2, 1, 1}, 2},
      {3, {2, 2, 2, 3, 3}, {2, 5, 2, 1, 3}, {2, 1, 3}, {0, 0, 1}, {1, 0, 2}, {1, 1, 1}, 1}};
  uint64_t seed = 500;
  for (const Case& c : cases) {
    ops::ConvSpec spec;
    spec.rank = c.rank;
    spec.groups = c.g;
    spec.stride = c.s;
    spec.padding = c.p;
    spec.output_padding = c.op;
    spec.dilation = c.d;
    const Tensor x = test::random_tensor(c.x, seed++), w = test::random_tensor(c.w, seed++);
    const Tensor b = test::random_tensor({c.w[1] * c.g}, seed++);
    const Tensor want = cpu::conv_transpose_nd(x, w, b, spec);
    const Tensor got = ops::conv_transpose_nd(gpu(x), gpu(w), gpu(b), spec);
    EXPECT_TRUE(near(got, want, kAtol, kRtol)) << "rank " << c.rank << " x " << c.x.str()
                                               << " w " << c.w.str();
  }
}

TEST(CudaConv, Bf16StorageUsesBf16GemmAndKeepsItsDtype) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({1, 16, 5, 6, 7}, 9);
  const Tensor w = test::random_tensor({8, 16, 3, 3, 3}, 10), b = test::random_tensor({8}, 11);
  const Tensor got = ops::conv3d(gpu(x).to(DType::BF16), gpu(w).to(DType::BF16),
                                 gpu(b).to(DType::BF16), {1, 1, 1}, {1, 1, 1});
  EXPECT_EQ(got.dtype(), DType::BF16);
  const Tensor want = ops::conv3d(x.to(DType::BF16).to(DType::F32),
                                  w.to(DType::BF16).to(DType::F32),
                                  b.to(DType::BF16).to(DType::F32), {1, 1, 1}, {1, 1, 1});
  // Exact bf16 products, fp32 sums: one bf16 rounding of the output (~4e-3 relative).
  EXPECT_TRUE(near(got, want, 3e-2, 1e-2));
  // A mixed f32 / bf16 call computes in f32 and returns f32.
  EXPECT_EQ(ops::conv3d(gpu(x), gpu(w).to(DType::BF16)).dtype(), DType::F32);
}

TEST(CudaConv, BadArgumentsThrow) {
  LTX_REQUIRE_CUDA();
  const Tensor x = gpu(test::random_tensor({1, 4, 8}, 12));
  EXPECT_THROW(ops::conv1d(x, test::random_tensor({2, 4, 3}, 13)), Error);  // mixed devices
  EXPECT_THROW(ops::conv1d(x, gpu(test::random_tensor({2, 3, 3}, 14))), Error);
  EXPECT_THROW(ops::conv1d(x.to(DType::F16), gpu(test::random_tensor({2, 4, 3}, 15))), Error);
}

}  // namespace
}  // namespace ltx::conv_test
