// The DubIt pipeline with its models on the GPU against the same run on the CPU (tiny LTX-2.3
// fixture models in f32, f32 latents): the reference clip is prepared on the host and tiled-encoded
// on the GPU in both stages, its audio track is resampled and turned into a log-mel on the host (as
// a2vid's input) and encoded on the GPU, the reference tokens join both stages' audio there, stage
// 2 holds stage 1's audio frozen.
// The clip and its track are synthetic (no FFmpeg on the GPU machine). The devices differ only in
// summation order, so the latents agree to rel L2 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/tiny_e2e_models.h"
#include "io/safetensors.h"
#include "models/audio_vae/audio_vae.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx::dubit_device_test {
namespace {

using pipelines::PipelineKind;

// 11 frames of 48x30 at 24 fps (9 used) and 0.5 s of a 48 kHz stereo track; 256x128 output with
// the reference at half of each stage's size, as the e2e recording.
pipelines::GenerationRequest request() {
  auto r = pipelines::default_request(PipelineKind::DubIt, "2.3.0");
  r.seed = 42;
  r.height = 256;
  r.width = 128;
  r.dtype = DType::F32;
  r.reference_downscale_factor = 2;
  const int64_t rate = 48000, n = 24000;
  std::vector<float> v(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(rate);
    v[static_cast<size_t>(i)] = static_cast<float>(0.5 * std::sin(2 * M_PI * 180 * t));
    v[static_cast<size_t>(n + i)] = static_cast<float>(0.3 * std::sin(2 * M_PI * 240 * t + 1.0));
  }
  pipelines::DubItReference ref;
  ref.frames = test::random_tensor({11, 48, 30, 3}, 41, 0.f, 255.f).to(DType::U8);
  ref.frame_rate = 24.0;
  ref.waveform = Tensor::from_vector(v, Shape{2, n});
  ref.sample_rate = rate;
  ref.strength = 0.9;
  ref.path = "clip";
  r.dubit = ref;
  return r;
}

TEST(DubItOnCuda, ReferenceClipAndBothStagesMatchTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  const test::TinyE2eModels cpu(nn::LoadOptions{DType::F32, Device::cpu()}, true);
  const test::TinyE2eModels gpu(nn::LoadOptions{DType::F32, test::kGpu}, true);
  const pipelines::TextContexts ctx = test::e2e_positive_contexts();
  const auto want = pipelines::run_pipeline(PipelineKind::DubIt, request(), cpu.components(Device::cpu()), ctx);
  const auto got = pipelines::run_pipeline(PipelineKind::DubIt, request(), gpu.components(test::kGpu), ctx);
  ASSERT_TRUE(got.video_latent.device().is_cpu());
  ASSERT_TRUE(got.audio_latent.device().is_cpu());
  EXPECT_EQ(got.num_frames, 9);
  ASSERT_EQ(got.video_latent.shape(), want.video_latent.shape());
  ASSERT_EQ(got.audio_latent.shape(), want.audio_latent.shape());
  const double v = test::rel_l2(got.video_latent, want.video_latent);
  const double a = test::rel_l2(got.audio_latent, want.audio_latent);
  std::printf("[dubit] video rel_l2 %.3e audio rel_l2 %.3e\n", v, a);
  EXPECT_LE(v, 1e-4);
  EXPECT_LE(a, 1e-4);
}

}  // namespace
}  // namespace ltx::dubit_device_test
