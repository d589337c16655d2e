// run_diffusion_stage on StageConfig::device: the states are moved there once, the denoiser sees
// them there, and the stage output comes back to the CPU. The CUDA case (skipped without a GPU)
// checks that a stage on the GPU gives the CPU stage's latents bit for bit: the mock denoiser and
// the per-step maths use only add/mul, which both backends round identically.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <vector>

#include "ops/elementwise.h"
#include "pipelines/stages.h"
#include "sampling/noise.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using pipelines::ModalityInput;
using pipelines::Sampler;
using pipelines::StageConfig;
using pipelines::StageOutput;
using sampling::DenoiseOutput;
using sampling::LatentState;

// x0 = 0.5 x + 0.05 sigma on the state's device, in the latent's dtype; records where every state
// tensor the denoiser saw lived.
struct DeviceMock {
  std::vector<Device> seen;
  DenoiseOutput operator()(const LatentState* v, const LatentState* a, const std::vector<double>& s, int64_t i) {
    const double sigma = s.at(static_cast<size_t>(i));
    auto f = [&](const LatentState& st) {
      for (const Tensor* t : {&st.latent, &st.denoise_mask, &st.positions, &st.clean_latent})
        seen.push_back(t->device());
      return ops::add(ops::mul(st.latent.to(DType::F32), 0.5), 0.05 * sigma).to(st.latent.dtype());
    };
    DenoiseOutput out;
    if (v) out.video.denoised = f(*v);
    if (a) out.audio.denoised = f(*a);
    return out;
  }
};

StageConfig config(Sampler sampler, Device device) {
  StageConfig c;
  c.height = 64;
  c.width = 96;
  c.num_frames = 9;
  c.sigmas = {1.0f, 0.725f, 0.421875f, 0.0f};
  c.sampler = sampler;
  c.ancestral_seed = 7;
  c.widths.video_channels = 8;
  c.widths.audio_channels = 2;
  c.widths.audio_mel_bins = 4;
  c.device = device;
  return c;
}

StageOutput run(Sampler sampler, Device device, DeviceMock& mock) {
  sampling::TorchCpuGenerator noise(11);
  const sampling::Denoiser d = [&](const LatentState* v, const LatentState* a, const std::vector<double>& s,
                                   int64_t i) { return mock(v, a, s, i); };
  return pipelines::run_diffusion_stage(config(sampler, device), ModalityInput{}, ModalityInput{}, d, noise);
}

bool bits_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return std::memcmp(ac.raw_data(), bc.raw_data(), ac.nbytes()) == 0;
}

constexpr Sampler kSamplers[] = {Sampler::Euler, Sampler::EulerAncestral, Sampler::Res2s};

TEST(StageDevice, CpuStageRunsOnTheCpuAndReturnsCpuLatents) {
  for (Sampler s : kSamplers) {
    DeviceMock mock;
    const StageOutput out = run(s, Device::cpu(), mock);
    ASSERT_FALSE(mock.seen.empty());
    for (const Device& d : mock.seen) EXPECT_TRUE(d.is_cpu());
    EXPECT_TRUE(out.video_latent.device().is_cpu());
    EXPECT_EQ(out.video_latent.dtype(), DType::BF16);
    EXPECT_EQ(out.video_latent.shape(), (Shape{1, 8, 2, 2, 3}));
    ASSERT_TRUE(out.audio_latent.defined());
    // Deterministic: a second run is identical.
    DeviceMock again;
    const StageOutput out2 = run(s, Device::cpu(), again);
    EXPECT_TRUE(bits_equal(out.video_latent, out2.video_latent));
    EXPECT_TRUE(bits_equal(out.audio_latent, out2.audio_latent));
  }
}

TEST(StageDevice, CudaStageMatchesTheCpuStageBitForBit) {
  LTX_REQUIRE_CUDA();
  for (Sampler s : kSamplers) {
    DeviceMock cpu_mock, gpu_mock;
    const StageOutput want = run(s, Device::cpu(), cpu_mock);
    const StageOutput got = run(s, Device::cuda(0), gpu_mock);
    ASSERT_FALSE(gpu_mock.seen.empty());
    for (const Device& d : gpu_mock.seen) EXPECT_TRUE(d.is_cuda());
    EXPECT_TRUE(got.video_latent.device().is_cpu());
    EXPECT_TRUE(got.audio_latent.device().is_cpu());
    EXPECT_TRUE(bits_equal(got.video_latent, want.video_latent)) << static_cast<int>(s);
    EXPECT_TRUE(bits_equal(got.audio_latent, want.audio_latent)) << static_cast<int>(s);
  }
}

}  // namespace
}  // namespace ltx
