// Timings of the CUDA ops on the full-size LTX-2.3 shapes (768 x 512, 121 frames: 6144 video
// tokens of width 4096, 32 heads of 128; 126 audio tokens of width 2048, 32 heads of 64). Disabled:
// it prints numbers and asserts nothing; run it on the GPU machine with
//   test_cuda --gtest_also_run_disabled_tests --gtest_filter='CudaTiming.*'
// Baselines for the performance work, not results (bench/RESULTS.md holds those).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "backend/cuda/device.h"
#include "cuda/cuda_test_util.h"
#include "backend/cuda/attention.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;

// Mean seconds per call over `reps` calls after one warm-up.
double seconds_per_call(const std::function<void()>& fn, int reps) {
  fn();
  cuda::synchronize(0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) fn();
  cuda::synchronize(0);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

Tensor rand_gpu(const Shape& s, uint64_t seed, DType dt) {
  return test::random_tensor(s, seed).to(kGpu, dt);
}

TEST(CudaTiming, DISABLED_PrintsKernelTimesOnFullSizeShapes) {
  LTX_REQUIRE_CUDA();
  for (DType dt : {DType::BF16, DType::F32}) {
    const char* dn = dtype_name(dt);
    // Attention: video self (6144 x 6144, D 128), text cross (6144 x 1024), audio self (126, D 64).
    struct Case {
      const char* name;
      int64_t h, tq, tk, d;
    };
    for (const Case& c :
         {Case{"video self", 32, 6144, 6144, 128}, Case{"video text", 32, 6144, 1024, 128},
          Case{"audio self", 32, 126, 126, 64}}) {
      const Tensor q = rand_gpu({1, c.tq, c.h, c.d}, 1, dt).transpose(1, 2);
      const Tensor k = rand_gpu({1, c.tk, c.h, c.d}, 2, dt).transpose(1, 2);
      const Tensor v = rand_gpu({1, c.tk, c.h, c.d}, 3, dt).transpose(1, 2);
      const double flops = 4.0 * c.h * c.tq * c.tk * c.d;
      const float scale = 1.f / std::sqrt(static_cast<float>(c.d));
      for (const auto& [kname, kernel] :
           {std::pair{"auto", cuda::AttentionKernel::Auto},
            std::pair{"simple", cuda::AttentionKernel::Simple}}) {
        const double s = seconds_per_call(
            [&] { (void)cuda::scaled_dot_product_attention(q, k, v, Tensor(), scale, kernel); }, 3);
        std::printf("[timing %s] attention %-10s %-6s %.3f ms  %.1f TFLOP/s\n", dn, c.name, kname,
                    s * 1e3, flops / s / 1e12);
      }
    }
    // Memory-bound ops on the video stream [1, 6144, 4096].
    const Tensor x = rand_gpu({1, 6144, 4096}, 4, dt), y = rand_gpu({1, 6144, 4096}, 5, dt);
    const Tensor row = rand_gpu({1, 1, 4096}, 6, dt);
    const double bytes = static_cast<double>(x.nbytes());
    const auto report = [&](const char* name, double s, double passes) {
      std::printf("[timing %s] %-22s %.3f ms  %.0f GB/s\n", dn, name, s * 1e3,
                  passes * bytes / s / 1e9);
    };
    report("add", seconds_per_call([&] { (void)ops::add(x, y); }, 10), 3);
    report("modulate (row)", seconds_per_call([&] { (void)ops::modulate(x, row, row); }, 10), 2);
    report("gelu_tanh", seconds_per_call([&] { (void)ops::gelu_tanh(x); }, 10), 2);
    report("rms_norm", seconds_per_call([&] { (void)ops::rms_norm(x, Tensor(), 1e-6); }, 10), 2);
    report("layer_norm",
           seconds_per_call([&] { (void)ops::layer_norm(x, Tensor(), Tensor(), 1e-6); }, 10), 2);
    const Tensor c = rand_gpu({1, 32, 6144, 64}, 7, DType::F32),
                 sn = rand_gpu({1, 32, 6144, 64}, 8, DType::F32);
    const Tensor xh = x.view({1, 6144, 32, 128}).transpose(1, 2);
    report("rope split (q)",
           seconds_per_call([&] { (void)ops::apply_rope(xh, c, sn, ops::RopeLayout::Split); }, 10),
           2);
    // A GEMM of the FFN: [6144, 4096] @ [16384, 4096]^T.
    const Tensor w = rand_gpu({16384, 4096}, 9, dt);
    const double sg = seconds_per_call([&] { (void)ops::linear(x, w); }, 3);
    std::printf("[timing %s] linear 6144x4096x16384 %.3f ms  %.1f TFLOP/s\n", dn, sg * 1e3,
                2.0 * 6144 * 4096 * 16384 / sg / 1e12);
  }
}

}  // namespace
}  // namespace ltx
