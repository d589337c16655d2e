// The keyframe-interpolation and retake pipelines with every model on the GPU (Components::device
// cuda) against the same run on the CPU, on the tiny LTX-2.3 model set (tests/fixtures/e2e/), f32
// weights and latents on both devices. The devices differ only in summation order (~1e-6 relative
// per op); through 1 + 1 (keyframe interpolation) or 2 (retake) denoising steps, the encoders and
// the upsampler the final latents stay within rel L2 1e-4. Retake's kept latents (outside the
// window) are the encoded clip on either device, so they differ only by the encoders' rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/audio_vae/audio_vae.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/transformer/model.h"
#include "models/upsampler/model.h"
#include "models/video_vae/video_vae.h"
#include "pipelines/pipeline.h"
#include "support/e2e_compare.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace mt = models::transformer;
using e2e_fixture::e2e;
using pipelines::PipelineKind;

// The tiny models on one device (f32), the distilled LoRA fused into the stage-2 transformer.
struct DeviceModels {
  std::unique_ptr<mt::LTXModel> transformer, transformer_lora;
  std::unique_ptr<models::video_vae::VideoEncoder> encoder;
  std::unique_ptr<models::audio_vae::AudioEncoder> audio_encoder;
  std::unique_ptr<models::upsampler::LatentUpsampler> upsampler;

  explicit DeviceModels(Device device) {
    const nn::LoadOptions opt{DType::F32, device};
    auto file = io::SafetensorsFile::open(e2e("ltx23_tiny.safetensors"));
    const mt::LTXModelConfig config = mt::LTXModelConfig::from_file(*file, mt::LTXModelType::AudioVideo);
    for (const bool lora : {false, true}) {
      io::WeightMap w({file}, mt::transformer_key_map(mt::LTXModelType::AudioVideo));
      if (lora)
        lora::fuse_into(w, lora::LoraSet{{lora::LoraFile::open(e2e("ltx23_tiny_distilled_lora.safetensors")), 1.0}});
      (lora ? transformer_lora : transformer) = std::make_unique<mt::LTXModel>(mt::LTXModel::load(w, config, opt));
    }
    encoder = std::make_unique<models::video_vae::VideoEncoder>(
        models::video_vae::VideoEncoder::from_file(e2e("ltx23_tiny.safetensors"), opt));
    audio_encoder = std::make_unique<models::audio_vae::AudioEncoder>(models::audio_vae::AudioEncoder::from_file(file, opt));
    upsampler = std::make_unique<models::upsampler::LatentUpsampler>(
        models::upsampler::LatentUpsampler::from_file(e2e("ltx23_tiny_upsampler_x2.safetensors"), opt));
  }
  pipelines::Components components(Device device, bool lora_in_stage_2) const {
    pipelines::Components c;
    c.transformer = transformer.get();
    c.video_encoder = encoder.get();
    c.audio_encoder = audio_encoder.get();
    c.spatial_upsampler = upsampler.get();
    c.model_version = "2.3.0";
    c.device = device;
    if (lora_in_stage_2)
      c.stage_transformer = [this](pipelines::Stage s) -> const mt::LTXModel& {
        return s == pipelines::Stage::Two ? *transformer_lora : *transformer;
      };
    return c;
  }
};

pipelines::TextContexts e2e_contexts() {
  auto text = io::SafetensorsFile::open(test::fixture("e2e_text.io.safetensors"));
  pipelines::TextContexts c;
  c.video_positive = text->tensor("out.text.positive.video_encoding").contiguous();
  c.audio_positive = text->tensor("out.text.positive.audio_encoding").contiguous();
  c.video_negative = text->tensor("out.text.negative.video_encoding").contiguous();
  c.audio_negative = text->tensor("out.text.negative.audio_encoding").contiguous();
  return c;
}

Tensor pattern_u8(const Shape& shape, int seed) {
  std::vector<uint8_t> px(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * (13 + seed) + 5 * seed) % 241);
  return Tensor::from_vector(px, shape);
}

void expect_close(const pipelines::GenerationResult& gpu, const pipelines::GenerationResult& cpu, const char* what) {
  for (const auto& [name, g, c] : {std::tuple{"video", gpu.video_latent, cpu.video_latent},
                                   std::tuple{"audio", gpu.audio_latent, cpu.audio_latent}}) {
    ASSERT_TRUE(g.defined() && c.defined()) << what << " " << name;
    ASSERT_EQ(g.shape(), c.shape()) << what << " " << name;
    EXPECT_TRUE(g.device().is_cpu()) << what << ": results come back to the host";
    const double rel = test::rel_l2(g, c);
    std::printf("[%s] %s latent %s: rel_l2 %.3e\n", what, name, g.shape().str().c_str(), rel);
    EXPECT_LE(rel, 1e-4) << what << " " << name;
  }
}

TEST(KeyframeRetakeCuda, KeyframeInterpolationOnTheGpuMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  const DeviceModels cpu_models(Device::cpu()), gpu_models(test::kGpu);
  pipelines::GenerationRequest r = pipelines::default_request(PipelineKind::KeyframeInterpolation, "2.3.0");
  r.seed = 42;
  r.num_frames = 9;
  r.height = 128;
  r.width = 64;
  r.num_inference_steps = 1;
  r.video_guider.stg_blocks = {1};
  r.audio_guider.stg_blocks = {1};
  r.stage_2_sigmas = std::vector<float>{0.9f, 0.0f};
  r.dtype = DType::F32;
  for (const auto& [frame, seed] : {std::pair<int64_t, int>{0, 1}, std::pair<int64_t, int>{8, 2}}) {
    pipelines::ImageConditioning im;
    im.image = pattern_u8(Shape{128, 64, 3}, seed);
    im.frame_index = frame;
    im.crf = 0;
    r.images.push_back(im);
  }
  const pipelines::TextContexts ctx = e2e_contexts();
  const auto cpu = pipelines::run_pipeline(PipelineKind::KeyframeInterpolation, r,
                                           cpu_models.components(Device::cpu(), true), ctx);
  const auto gpu = pipelines::run_pipeline(PipelineKind::KeyframeInterpolation, r,
                                           gpu_models.components(test::kGpu, true), ctx);
  expect_close(gpu, cpu, "keyframe-interpolation");
}

TEST(KeyframeRetakeCuda, RetakeOnTheGpuMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  const DeviceModels cpu_models(Device::cpu()), gpu_models(test::kGpu);
  pipelines::GenerationRequest r = pipelines::default_request(PipelineKind::Retake, "2.3.0");
  r.seed = 42;
  r.frame_rate = 24.0;
  r.dtype = DType::F32;
  r.stage_1_sigmas = std::vector<float>{1.0f, 0.6f, 0.0f};
  pipelines::RetakeSource src;
  src.frames = pattern_u8(Shape{9, 64, 96, 3}, 3);
  std::vector<float> wave(2 * 24000);
  for (size_t i = 0; i < wave.size(); ++i) wave[i] = static_cast<float>(0.3 * std::sin(0.05 * static_cast<double>(i)));
  src.waveform = Tensor::from_vector(wave, Shape{2, 24000});
  src.sample_rate = 48000;
  src.start_time = 0.1;
  src.end_time = 0.3;
  r.retake = src;
  const pipelines::TextContexts ctx = e2e_contexts();
  const auto cpu = pipelines::run_pipeline(PipelineKind::Retake, r, cpu_models.components(Device::cpu(), false), ctx);
  const auto gpu =
      pipelines::run_pipeline(PipelineKind::Retake, r, gpu_models.components(test::kGpu, false), ctx);
  expect_close(gpu, cpu, "retake");
  // Latent frame 0 lies before the window: the encoded clip on either device.
  EXPECT_LE(test::rel_l2(gpu.video_latent.narrow(2, 0, 1), cpu.video_latent.narrow(2, 0, 1)), 1e-4);
}

}  // namespace
}  // namespace ltx
