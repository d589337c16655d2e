// The audio pipelines with --device cuda against the CPU, through run_generation into a
// MemorySink on the built-in demo bundle (no FFmpeg needed: a2vid's soundtrack is handed over
// decoded, GenerateOptions::audio_input). f32 runs (GenerateOptions::dtype = F32) differ only in
// summation order; the tolerances are generate_device_test.cpp's: rel L2 2e-4 over all pixels /
// samples, the largest pixel difference below one 8-bit level, the largest sample 1e-3.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "generate/generate_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::InMemoryGeneration;

void expect_close(const Tensor& got, const Tensor& want, double rel_tol, double abs_tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const double rel = test::rel_l2(got, want), abs = test::max_abs_diff(got, want);
  std::printf("[%s] %s: rel_l2 %.3e max_abs %.3e\n", what.c_str(), got.shape().str().c_str(), rel, abs);
  EXPECT_TRUE(std::isfinite(rel)) << what;
  EXPECT_LE(rel, rel_tol) << what;
  EXPECT_LE(abs, abs_tol) << what;
}

// Each named stage of the GPU run made most of its tensors on the GPU.
void expect_ran_on_gpu(const InMemoryGeneration& gpu, const std::vector<std::string>& stages) {
  for (const std::string& s : stages) {
    const AllocationCounts a = gpu.stage(s).allocations;
    std::printf("  stage %-20s gpu run: %6lld host, %6lld cuda\n", s.c_str(), static_cast<long long>(a.host),
                static_cast<long long>(a.cuda));
    EXPECT_GT(a.cuda, a.host) << s << ": the stage's work did not run on the GPU";
  }
}

TEST(AudioPipelinesOnCuda, T2AMatchesTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  generate::GenerateOptions o = test::small_demo_options("t2a", 64, 64);
  o.height.reset();
  o.width.reset();
  o.dtype = DType::F32;
  o.device = Device::cpu();
  const InMemoryGeneration cpu = test::generate_in_memory(o);
  o.device = test::kGpu;
  const InMemoryGeneration gpu = test::generate_in_memory(o);
  EXPECT_FALSE(gpu.media.frames.defined());
  ASSERT_TRUE(gpu.media.waveform.defined());
  EXPECT_EQ(gpu.media.format.audio_sample_rate, cpu.media.format.audio_sample_rate);
  expect_close(gpu.media.waveform, cpu.media.waveform, 2e-4, 1e-3, "t2a f32 waveform");
  expect_ran_on_gpu(gpu, {"text encoding", "stage 1", "audio decode"});
  EXPECT_EQ(gpu.stage("stage 1").step_read_backs, 0);
}

TEST(AudioPipelinesOnCuda, A2VidMatchesTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  // 0.6 s of a 22050 Hz stereo soundtrack: resampled to 16 kHz and encoded on each device.
  const int64_t rate = 22050, n = 13230;
  std::vector<float> v(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(rate);
    v[static_cast<size_t>(i)] = static_cast<float>(0.5 * std::sin(2 * M_PI * 220 * t));
    v[static_cast<size_t>(n + i)] = static_cast<float>(0.3 * std::sin(2 * M_PI * 550 * t + 1.0));
  }
  generate::GenerateOptions o = test::small_demo_options("a2vid", 64, 128);
  o.audio_input = media::AudioTrack{Tensor::from_vector(v, Shape{2, n}), static_cast<int>(rate)};
  o.audio_start_time = 0.1;
  o.dtype = DType::F32;
  o.device = Device::cpu();
  const InMemoryGeneration cpu = test::generate_in_memory(o);
  o.device = test::kGpu;
  const InMemoryGeneration gpu = test::generate_in_memory(o);
  ASSERT_TRUE(gpu.media.frames.defined());
  expect_close(gpu.media.frames, cpu.media.frames, 2e-4, 1.0 / 255.0, "a2vid f32 frames");
  // The output audio is the input, cut the same way on both.
  EXPECT_EQ(test::max_abs_diff(gpu.media.waveform, cpu.media.waveform), 0.0);
  EXPECT_EQ(gpu.media.format.audio_sample_rate, rate);
  // (The audio conditioning stage resamples and takes the log-mel on the host, as the CPU path.)
  expect_ran_on_gpu(gpu, {"text encoding", "stage 1", "upsample", "stage 2", "video decode"});
  EXPECT_EQ(gpu.stage("stage 1").step_read_backs, 0);
  EXPECT_EQ(gpu.stage("stage 2").step_read_backs, 0);
}

}  // namespace
}  // namespace ltx
