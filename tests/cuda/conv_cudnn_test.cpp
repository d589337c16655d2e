// cuDNN's bf16 convolution (cuda::cudnn_conv_nd) against the CPU conv on the same bf16-rounded
// inputs: 1-3 spatial dims, strides, padding, dilation, groups, bias, odd sizes, and which cases
// it takes.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/conv.h"
#include "backend/cuda/conv_cudnn.h"
#include "backend/cuda/conv_tuning_cache.h"
#include "cuda/cuda_test_util.h"
#include "io/io_test_util.h"
#include "ops/conv.h"
#include "support/test_support.h"

namespace ltx::conv_cudnn_test {
namespace {

using test::kGpu;
using test::rel_l2;

Tensor bf16_cpu(const Shape& s, uint64_t seed) {
  return test::random_tensor(s, seed).to(DType::BF16).to(DType::F32);
}


ops::ConvSpec spec_of(int rank, int64_t stride, int64_t pad, int64_t dil, int64_t groups) {
  ops::ConvSpec s;
  s.rank = rank;
  for (int i = 0; i < rank; ++i) {
    s.stride[i] = stride;
    s.padding[i] = pad;
    s.dilation[i] = dil;
  }
  s.groups = groups;
  return s;
}

struct Case {
  int rank;
  int64_t n, c, o, size, k, stride, pad, dil, groups;
};

TEST(CudaCudnnConv, MatchesCpuConvOnBf16Inputs) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (const Case& c : {Case{3, 1, 16, 32, 9, 3, 1, 1, 1, 1}, Case{3, 2, 8, 16, 7, 3, 2, 0, 1, 1},
                        Case{3, 1, 24, 24, 6, 3, 1, 2, 2, 3}, Case{3, 1, 128, 64, 5, 1, 1, 0, 1, 1},
                        Case{2, 2, 16, 16, 13, 3, 2, 1, 1, 2}, Case{1, 3, 8, 16, 33, 5, 1, 2, 1, 1},
                        Case{1, 1, 32, 32, 17, 7, 3, 3, 2, 4}}) {
    SCOPED_TRACE("rank " + std::to_string(c.rank) + " C " + std::to_string(c.c) + " O " +
                 std::to_string(c.o) + " size " + std::to_string(c.size) + " k " +
                 std::to_string(c.k) + " stride " + std::to_string(c.stride) + " pad " +
                 std::to_string(c.pad) + " dil " + std::to_string(c.dil) + " groups " +
                 std::to_string(c.groups));
    Shape xs{c.n, c.c}, ws{c.o, c.c / c.groups};
    for (int i = 0; i < c.rank; ++i) {
      xs.push_back(c.size + i);  // unequal spatial dims
      ws.push_back(c.k);
    }
    const Tensor x = bf16_cpu(xs, seed++), w = bf16_cpu(ws, seed++), b = bf16_cpu({c.o}, seed++);
    const ops::ConvSpec spec = spec_of(c.rank, c.stride, c.pad, c.dil, c.groups);
    const Tensor xg = x.to(kGpu, DType::BF16), wg = w.to(kGpu, DType::BF16), bg = b.to(kGpu, DType::BF16);
    ASSERT_TRUE(cuda::cudnn_conv_applies(xg, wg, bg, spec));
    const Tensor want = cpu::conv_nd(x, w, b, spec);
    const Tensor got = cuda::cudnn_conv_nd(xg, wg, bg, spec);
    ASSERT_EQ(got.dtype(), DType::BF16);
    ASSERT_EQ(got.shape(), want.shape());
    // bf16 output of an f32-accumulated convolution (+ the bias rounded once more).
    EXPECT_LE(rel_l2(got, want), 8e-3);
    // Without a bias, and on a strided (non-contiguous) input.
    const Tensor want_nb = cpu::conv_nd(x, w, Tensor(), spec);
    EXPECT_LE(rel_l2(cuda::cudnn_conv_nd(xg, wg, Tensor(), spec), want_nb), 8e-3);
    const Tensor xt = x.to(kGpu, DType::BF16).transpose(0, 1).contiguous().transpose(0, 1);
    EXPECT_LE(rel_l2(cuda::cudnn_conv_nd(xt, wg, Tensor(), spec), want_nb), 8e-3);
  }
}

// The video decoder's causal convolutions pad time by hand and pass (0, 1, 1) here.
TEST(CudaCudnnConv, MatchesCpuConvWithUnevenPadding) {
  LTX_REQUIRE_CUDA();
  const Tensor x = bf16_cpu({1, 8, 11, 16, 32}, 11), w = bf16_cpu({8, 8, 3, 3, 3}, 12);
  ops::ConvSpec spec = spec_of(3, 1, 1, 1, 1);
  spec.padding[0] = 0;
  const Tensor xg = x.to(kGpu, DType::BF16), wg = w.to(kGpu, DType::BF16);
  ASSERT_TRUE(cuda::cudnn_conv_applies(xg, wg, Tensor(), spec));
  const Tensor want = cpu::conv_nd(x, w, Tensor(), spec);
  const Tensor got = cuda::cudnn_conv_nd(xg, wg, Tensor(), spec);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LE(rel_l2(got, want), 8e-3);
}

// Channels-last bf16 wants 8-channel multiples per group: cuDNN rejected a 4-channel call (the
// tiny demo model's latents) with CUDNN_STATUS_BAD_PARAM, so those stay on the im2col path.
TEST(CudaCudnnConv, LeavesChannelCountsOffEightToTheGemmPath) {
  LTX_REQUIRE_CUDA();
  const ops::ConvSpec spec = spec_of(3, 1, 1, 1, 1);
  const auto applies = [&](int64_t c, int64_t o, int64_t groups) {
    const Tensor x = Tensor::zeros({1, c, 5, 5, 5}, DType::BF16, kGpu);
    const Tensor w = Tensor::zeros({o, c / groups, 3, 3, 3}, DType::BF16, kGpu);
    ops::ConvSpec s = spec;
    s.groups = groups;
    return cuda::cudnn_conv_applies(x, w, Tensor(), s);
  };
  EXPECT_TRUE(applies(8, 16, 1));
  EXPECT_TRUE(applies(16, 16, 2));
  EXPECT_FALSE(applies(4, 8, 1));
  EXPECT_FALSE(applies(8, 4, 1));
  EXPECT_FALSE(applies(16, 16, 4));
}

// cuDNN's backend-API plans (kForced: the fastest plan runs even where the legacy algorithm is
// faster) against the legacy algorithm (kOff) and the CPU, and the default timed choice, on the
// VAE decoder's kinds of convs: a 3x3x3, a 1-frame 1x3x3, and the replicate-time fold, whose
// boundary frames accumulate onto the output (beta 1).
TEST(CudaCudnnConv, BackendPlansMatchLegacyAndCpu) {
  LTX_REQUIRE_CUDA();
  using cuda::CudnnBackendMode;
  struct RestoreMode {
    ~RestoreMode() { cuda::set_cudnn_backend_mode(CudnnBackendMode::kDefault); }
  } restore;
  struct Conv {
    std::string name;
    Shape x, w;
    bool fold;      // ops::conv3d_replicate_time (time padded 1 / 1), else ops::conv3d (padding
                    // k_t / 2 in time, 1 in space)
    int64_t convs;  // cuDNN convolutions per call
  };
  uint64_t seed = 40;
  for (const Conv& c : {Conv{"3x3x3", {1, 64, 5, 12, 16}, {64, 64, 3, 3, 3}, false, 1},
                        Conv{"1-frame 1x3x3", {1, 64, 1, 12, 16}, {64, 64, 1, 3, 3}, false, 1},
                        // the main conv, then one beta-1 conv per boundary frame
                        Conv{"fold", {1, 64, 5, 12, 16}, {64, 64, 3, 3, 3}, true, 3}}) {
    SCOPED_TRACE(c.name);
    const Tensor x = bf16_cpu(c.x, seed++), w = bf16_cpu(c.w, seed++);
    const Tensor b = bf16_cpu({c.w[0]}, seed++);
    const Tensor xg = x.to(kGpu, DType::BF16), wg = w.to(kGpu, DType::BF16);
    const Tensor bg = b.to(kGpu, DType::BF16);
    const int64_t pad_t = c.w[2] / 2;
    if (c.fold) {
      ops::ConvSpec spec = spec_of(3, 1, 1, 1, 1);
      spec.padding[0] = 0;
      ASSERT_TRUE(cuda::cudnn_replicate_time_applies(xg, wg, bg, spec, 1, 1));
    }
    const auto run = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
      return c.fold ? ops::conv3d_replicate_time(xi, wi, bi, {1, 1, 1}, {1, 1}, 1, 1)
                    : ops::conv3d(xi, wi, bi, {1, 1, 1}, {pad_t, 1, 1});
    };
    const Tensor want = run(x, w, b);
    const auto on_gpu = [&](CudnnBackendMode mode) {
      cuda::set_cudnn_backend_mode(mode);
      const int64_t before = cuda::cudnn_backend_executions();
      Tensor got = run(xg, wg, bg);
      // The first call of a geometry chooses (and times); the second runs the cached choice.
      got = run(xg, wg, bg);
      return std::make_pair(got, cuda::cudnn_backend_executions() - before);
    };
    const auto [legacy, legacy_runs] = on_gpu(CudnnBackendMode::kOff);
    const auto [backend, backend_runs] = on_gpu(CudnnBackendMode::kForced);
    const auto [timed, timed_runs] = on_gpu(CudnnBackendMode::kTimed);
    EXPECT_EQ(legacy_runs, 0);
    // Every convolution of both calls ran a plan: a failure here means cuDNN offered no usable
    // plan for the geometry (or beta), and it silently stays on the legacy path.
    EXPECT_EQ(backend_runs, 2 * c.convs);
    EXPECT_LE(timed_runs, 2 * c.convs);
    ASSERT_EQ(backend.shape(), want.shape());
    EXPECT_LE(rel_l2(backend, legacy), 1e-2);
    EXPECT_LE(rel_l2(legacy, want), 8e-3);
    EXPECT_LE(rel_l2(backend, want), 8e-3);
    EXPECT_LE(rel_l2(timed, want), 8e-3);
  }
}

// The timed decisions go to the tuning cache file; a process that has not decided yet (here: the
// same process after forgetting its decisions) rebuilds them from it without timing anything and
// computes the same bits. A malformed file is ignored and rewritten.
TEST(CudaCudnnConv, TuningCacheRebuildsTheDecisionsWithoutTiming) {
  LTX_REQUIRE_CUDA();
  using cuda::CudnnBackendMode;
  const test::TempDir dir;
  const std::string file = dir.file("tuning/cudnn-conv.json");
  struct Restore {
    std::string path = cuda::conv_tuning::path();
    ~Restore() {
      cuda::conv_tuning::set_path_for_tests(path);
      cuda::set_cudnn_backend_mode(CudnnBackendMode::kDefault);
    }
  } restore;
  cuda::conv_tuning::set_path_for_tests(file);
  cuda::set_cudnn_backend_mode(CudnnBackendMode::kTimed);
  cuda::forget_cudnn_conv_choices_for_tests();

  const Tensor x = bf16_cpu({1, 48, 5, 10, 14}, 90).to(kGpu, DType::BF16);
  const Tensor w = bf16_cpu({48, 48, 3, 3, 3}, 91).to(kGpu, DType::BF16);
  const Tensor b = bf16_cpu({48}, 92).to(kGpu, DType::BF16);
  // A plain 3x3x3 and the replicate-time fold (its boundary frames: beta-1 convs).
  const auto run = [&] {
    return std::make_pair(ops::conv3d(x, w, b, {1, 1, 1}, {1, 1, 1}),
                          ops::conv3d_replicate_time(x, w, b, {1, 1, 1}, {1, 1}, 1, 1));
  };
  const int64_t s0 = cuda::cudnn_conv_timed_searches();
  const auto first = run();
  const int64_t s1 = cuda::cudnn_conv_timed_searches();
  EXPECT_GT(s1, s0) << "a fresh cache file: the first calls time their choices";
  std::string text;
  {
    std::ifstream in(file);
    ASSERT_TRUE(in.good()) << file << " was not written";
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  EXPECT_NE(text.find("\"legacy x 1,48,5,10,14"), std::string::npos) << text;
  EXPECT_NE(text.find("\"backend beta 0 x 1,48,5,10,14"), std::string::npos) << text;
  EXPECT_NE(text.find("\"backend beta 1 x 1,48,1,10,14"), std::string::npos) << text;

  cuda::forget_cudnn_conv_choices_for_tests();
  const auto second = run();
  EXPECT_EQ(cuda::cudnn_conv_timed_searches(), s1) << "the stored choices were timed again";
  EXPECT_TRUE(test::same_bytes(second.first, first.first));
  EXPECT_TRUE(test::same_bytes(second.second, first.second));

  // Not JSON: ignored (timed afresh) and replaced by a valid file.
  { std::ofstream(file, std::ios::trunc) << "{ not json"; }
  cuda::conv_tuning::set_path_for_tests(file);
  cuda::forget_cudnn_conv_choices_for_tests();
  const auto third = run();
  EXPECT_GT(cuda::cudnn_conv_timed_searches(), s1);
  EXPECT_LE(rel_l2(third.first, first.first), 1e-2);  // a fresh choice: maybe another plan
  std::ifstream again(file);
  std::stringstream rewritten;
  rewritten << again.rdbuf();
  EXPECT_EQ(rewritten.str().rfind("{", 0), 0u) << rewritten.str();
  EXPECT_NE(rewritten.str().find("\"format\": 1"), std::string::npos);
}

TEST(CudaCudnnConv, TakesOnlyBf16) {
  LTX_REQUIRE_CUDA();
  const Tensor x = Tensor::zeros({1, 8, 5, 5, 5}, DType::F32, kGpu);
  const Tensor w = Tensor::zeros({8, 8, 3, 3, 3}, DType::F32, kGpu);
  const ops::ConvSpec spec = spec_of(3, 1, 1, 1, 1);
  EXPECT_FALSE(cuda::cudnn_conv_applies(x, w, Tensor(), spec));
  EXPECT_FALSE(cuda::cudnn_conv_applies(x.to(DType::BF16), w, Tensor(), spec));
  EXPECT_TRUE(cuda::cudnn_conv_applies(x.to(DType::BF16), w.to(DType::BF16), Tensor(), spec));
  // An f32 bias keeps the f32 path (the op's result would be f32).
  EXPECT_FALSE(cuda::cudnn_conv_applies(x.to(DType::BF16), w.to(DType::BF16),
                                        Tensor::zeros({8}, DType::F32, kGpu), spec));
}

}  // namespace
}  // namespace ltx::conv_cudnn_test
