// Per-sample timesteps and timestep runs on CUDA (pipelines::TimestepForm): a state moved to the
// GPU keeps the mask runs read on the host, so modality_from_state forms [B, 1, 1] timesteps, or
// per-token ones with their runs, without reading the device back; the guided step gives the
// per-token form's results to bf16 rounding.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "io/safetensors.h"
#include "models/transformer/model.h"
#include "parity/parity.h"
#include "pipelines/denoisers.h"
#include "support/test_support.h"

namespace ltx::timestep_form_test {
namespace {

namespace mt = models::transformer;
using pipelines::GuidedDenoiser;
using pipelines::TimestepForm;
using sampling::LatentState;
using test::kGpu;

double rel_l2(const Tensor& got, const Tensor& want) {
  return parity::compare(got.to(Device::cpu(), DType::F32), want.to(Device::cpu(), DType::F32)).rel_l2;
}

TEST(CudaTimestepForm, DeviceStatesKeepTheirHostMaskLevels) {
  LTX_REQUIRE_CUDA();
  const sampling::VideoLatentTools tools{sampling::VideoLatentShape{2, 4, 2, 3, 5}, 24.0};
  const LatentState host = tools.create_initial_state(DType::F32);
  const LatentState dev = host.to(kGpu);
  ASSERT_EQ(dev.denoise_mask.device(), kGpu);
  const int64_t before = device_to_host_copies();
  EXPECT_EQ(sampling::uniform_mask_values(dev), (std::vector<float>{1.0f, 1.0f}));
  const mt::Modality m = pipelines::modality_from_state(dev.with_latent(dev.latent), Tensor(), 0.25);
  EXPECT_EQ(device_to_host_copies() - before, 0) << "the per-sample form needs no read-back";
  EXPECT_EQ(m.timesteps.device(), kGpu);
  EXPECT_EQ(m.timesteps.shape(), (Shape{2, 1, 1}));
  EXPECT_EQ(m.timesteps.to_float_vector(), (std::vector<float>{0.25f, 0.25f}));
  // A mask made on the device (nothing known on the host): per-token values, still no read-back.
  LatentState fresh = dev;
  fresh.denoise_mask = Tensor::full(dev.denoise_mask.shape(), 1.0, DType::F32, kGpu);
  const int64_t before_fresh = device_to_host_copies();
  EXPECT_FALSE(sampling::uniform_mask_values(fresh).has_value());
  EXPECT_EQ(pipelines::modality_from_state(fresh, Tensor(), 0.25).timesteps.shape(), (Shape{2, 30, 1}));
  EXPECT_EQ(device_to_host_copies() - before_fresh, 0);
  // Frame 0 of sample 0 pinned on the host (an image condition), then moved: per-token values with
  // the host's runs, still no read-back.
  LatentState pinned = tools.create_initial_state(DType::F32);
  pinned.denoise_mask.narrow(0, 0, 1).narrow(1, 0, 15).fill(0.0);
  const LatentState pinned_dev = pinned.to(kGpu);
  const int64_t before_pinned = device_to_host_copies();
  const mt::Modality r = pipelines::modality_from_state(pinned_dev, Tensor(), 0.25);
  EXPECT_EQ(device_to_host_copies() - before_pinned, 0) << "the runs need no read-back";
  EXPECT_EQ(r.timesteps.shape(), (Shape{2, 30, 1}));
  EXPECT_EQ(r.timestep_runs, (std::vector<std::vector<int64_t>>{{15, 15}, {30}}));
}

// One guided step on the GPU in the pipelines' timestep form and in the per-token form; `own_mask`:
// the fixture's video mask (frame 0 pinned: two runs) instead of all ones (one value per sample).
void expect_guided_step_equals_per_token_in_bf16(bool own_mask) {
  const io::SafetensorsFile io(test::fixture("ltx23.guided.io.safetensors"));
  const auto model = mt::LTXModel::from_files({test::fixture("ltx23.weights.safetensors")},
                                              mt::LTXModelType::AudioVideo, {DType::BF16, kGpu});
  const auto t = [&](const std::string& name) { return io.tensor(name).contiguous(); };
  const auto state = [&](const std::string& modality) {
    LatentState s;
    s.latent = t("in." + modality + ".latent");
    s.clean_latent = t("in." + modality + ".clean_latent");
    const Tensor mask = t("in." + modality + ".denoise_mask");
    s.denoise_mask = own_mask ? mask : Tensor::full(mask.shape(), 1.0);
    s.positions = t("in." + modality + ".positions");
    return s.to(kGpu);
  };
  const LatentState v = state("video"), a = state("audio");
  sampling::GuiderParams p;
  p.cfg_scale = 3.0;
  p.stg_scale = 1.0;
  p.modality_scale = 3.0;
  p.stg_blocks = {1};
  const auto ctx = [&](const std::string& m) -> pipelines::ModalityContext {
    return {t("in." + m + ".context_pos").to(kGpu), t("in." + m + ".context_neg").to(kGpu)};
  };
  std::vector<double> sigmas;
  for (float s : t("in.sigmas").to_float_vector()) sigmas.push_back(s);
  const auto step = [&](TimestepForm form) {
    GuidedDenoiser d(model, ctx("video"), ctx("audio"), p, p);
    d.set_timestep_form(form);
    return d(&v, &a, sigmas, 1);
  };
  const sampling::DenoiseOutput per_token = step(TimestepForm::PerToken);
  const sampling::DenoiseOutput per_sample = step(TimestepForm::PerSampleWhenUniform);
  for (const auto& [got, want] : {std::pair{&per_sample.video, &per_token.video},
                                  std::pair{&per_sample.audio, &per_token.audio}}) {
    EXPECT_LE(rel_l2(got->cond, want->cond), 1e-2);
    EXPECT_LE(rel_l2(got->uncond, want->uncond), 1e-2);
    EXPECT_LE(rel_l2(got->denoised, want->denoised), 1e-2);
  }
}

TEST(CudaTimestepForm, GuidedStepPerSampleEqualsPerTokenInBf16) {
  LTX_REQUIRE_CUDA();
  expect_guided_step_equals_per_token_in_bf16(false);
}

// The fixture's own video mask pins frame 0: the AdaLN per run of equal timesteps.
TEST(CudaTimestepForm, GuidedStepPerRunEqualsPerTokenInBf16) {
  LTX_REQUIRE_CUDA();
  expect_guided_step_equals_per_token_in_bf16(true);
}

}  // namespace
}  // namespace ltx::timestep_form_test
