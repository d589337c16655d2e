// The HDR IC-LoRA generation with its models on the GPU against the same run on the CPU (tiny
// LTX-2.3 fixture models in f32, f32 latents), in normal and high-quality mode: the reflect-padded
// reference clip is prepared on the host and encoded on the GPU, stage 1 and every stage-2 tile
// denoise there, the tiles are blended on the host. The clip is synthetic pixels at an unaligned
// size (72x176: generated at 128x192). The devices differ only in summation order, so the latents
// agree to rel L2 1e-4.
#include <gtest/gtest.h>

#include <cstdio>

#include "cuda/cuda_test_util.h"
#include "cuda/tiny_e2e_models.h"
#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/hdr_ic_lora.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx::hdr_ic_lora_device_test {
namespace {

namespace hdr = pipelines::hdr_ic_lora;

pipelines::GenerationRequest request() {
  pipelines::GenerationRequest r;
  r.seed = 42;
  r.height = 72;
  r.width = 176;
  r.num_frames = 9;
  r.dtype = DType::F32;
  r.audio = false;
  r.video_conditionings.push_back(
      {test::random_tensor({12, 72, 176, 3}, 41, 0.f, 255.f).to(DType::U8), 1.0, "clip"});
  return r;
}

TEST(HdrIcLoraOnCuda, BothStagesAndTheTilesMatchTheCpuInF32) {
  LTX_REQUIRE_CUDA();
  const test::TinyE2eModels cpu(nn::LoadOptions{DType::F32, Device::cpu()});
  const test::TinyE2eModels gpu(nn::LoadOptions{DType::F32, test::kGpu});
  const pipelines::TextContexts ctx = test::e2e_positive_contexts(false);
  for (const bool hq : {false, true}) {
    SCOPED_TRACE(hq ? "high quality" : "normal");
    hdr::HdrIcLoraOptions opt;
    opt.high_quality = hq;
    const auto want = hdr::run_hdr_ic_lora(request(), cpu.components(Device::cpu()), ctx, opt);
    const auto got = hdr::run_hdr_ic_lora(request(), gpu.components(test::kGpu), ctx, opt);
    ASSERT_TRUE(got.video_latent.device().is_cpu());
    ASSERT_EQ(got.video_latent.shape(), want.video_latent.shape());
    const double v = test::rel_l2(got.video_latent, want.video_latent);
    std::printf("[hdr-ic-lora %s] video rel_l2 %.3e\n", hq ? "high quality" : "normal", v);
    EXPECT_LE(v, 1e-4);
  }
}

}  // namespace
}  // namespace ltx::hdr_ic_lora_device_test
