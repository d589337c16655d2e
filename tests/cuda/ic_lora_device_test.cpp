// The IC-LoRA pipeline with its models on the GPU against the same run on the CPU (tiny LTX-2.3
// fixture models in f32, f32 latents): the reference clip is prepared on the host and encoded on
// the GPU, the attention mask's weights join the state there, both stages denoise there. The clip is
// synthetic pixels (no FFmpeg on the GPU machine). The devices differ only in summation order, so
// the latents agree to rel L2 1e-4.
#include <gtest/gtest.h>

#include <cstdio>

#include "cuda/cuda_test_util.h"
#include "cuda/tiny_e2e_models.h"
#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/ic_lora.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using pipelines::PipelineKind;

pipelines::GenerationRequest request(bool skip_stage_2) {
  auto r = pipelines::default_request(PipelineKind::IcLora, "2.3.0");
  r.seed = 42;
  r.height = 256;
  r.width = 128;
  r.num_frames = 9;
  r.dtype = DType::F32;
  r.reference_downscale_factor = 2;
  r.video_conditionings.push_back({test::random_tensor({12, 48, 30, 3}, 31, 0.f, 255.f).to(DType::U8), 0.8, "clip"});
  r.conditioning_attention_strength = 0.5;
  r.conditioning_attention_mask = test::random_tensor({1, 1, 9, 128, 64}, 32, 0.f, 1.f);
  r.skip_stage_2 = skip_stage_2;
  return r;
}

TEST(IcLoraOnCuda, ReferenceVideoMaskAndBothStagesMatchTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  const test::TinyE2eModels cpu(nn::LoadOptions{DType::F32, Device::cpu()});
  const test::TinyE2eModels gpu(nn::LoadOptions{DType::F32, test::kGpu});
  const pipelines::TextContexts ctx = test::e2e_positive_contexts();
  for (const bool skip : {true, false}) {
    SCOPED_TRACE(skip ? "stage 1 only" : "both stages");
    const auto want = pipelines::run_pipeline(PipelineKind::IcLora, request(skip), cpu.components(Device::cpu()), ctx);
    const auto got = pipelines::run_pipeline(PipelineKind::IcLora, request(skip), gpu.components(test::kGpu), ctx);
    ASSERT_TRUE(got.video_latent.device().is_cpu());
    ASSERT_EQ(got.video_latent.shape(), want.video_latent.shape());
    ASSERT_EQ(got.audio_latent.shape(), want.audio_latent.shape());
    const double v = test::rel_l2(got.video_latent, want.video_latent);
    const double a = test::rel_l2(got.audio_latent, want.audio_latent);
    std::printf("[ic-lora %s] video rel_l2 %.3e audio rel_l2 %.3e\n", skip ? "stage 1" : "two stages", v, a);
    EXPECT_LE(v, 1e-4);
    EXPECT_LE(a, 1e-4);
  }
}

}  // namespace
}  // namespace ltx
