// The res_2s loop on CUDA states: its float64 maths runs as device ops, bit-identical to the CPU
// run, and reads nothing back inside a step.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/elementwise.h"
#include "sampling/loops.h"
#include "sampling/sampling_fixtures.h"

namespace ltx {
namespace {

using sampling::AVState;
using sampling::DenoiseOutput;
using sampling::LatentState;
using test::kGpu;
using test::same_bytes;

Tensor in(const std::string& name) { return test::golden_tensor("sampling_loops", name); }

sampling::Sigmas schedule() {
  const std::vector<float> v = in("res2s.sigmas").to_float_vector();
  return {v.begin(), v.end()};
}

// The loop fixture's states on `device` (see loop_fixture_state).
AVState states(Device device, double video_mask = -1) {
  const AVState st = test::loop_fixture_state(video_mask);
  return sampling::on_device(st, device);
}

// denoised = 0.9 tanh(latent) + 0.05 sigma, computed on the host and returned on the latent's
// device, so that the CPU and CUDA runs see the same predictions; records its inputs.
struct HostMock {
  std::vector<Tensor> inputs;
  sampling::Denoiser fn() {
    return [this](const LatentState* v, const LatentState* a, const std::vector<double>& s, int64_t i) {
      const float shift = static_cast<float>(0.05 * s.at(static_cast<size_t>(i)));
      auto f = [&](const LatentState& st) {
        inputs.push_back(st.latent.to(Device::cpu()));
        std::vector<float> x = st.latent.to_float_vector();
        for (float& e : x) e = 0.9f * std::tanh(e) + shift;
        return Tensor::from_vector(x, st.latent.shape()).to(st.latent.device(), st.latent.dtype());
      };
      DenoiseOutput out;
      if (v) out.video.denoised = f(*v);
      if (a) out.audio.denoised = f(*a);
      return out;
    };
  }
};

TEST(CudaRes2sLoop, EqualsTheCpuRunBitForBit) {
  LTX_REQUIRE_CUDA();
  for (bool legacy : {true, false})
    for (DType dt : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(legacy ? "legacy" : "per-token") + (dt == DType::BF16 ? " bf16" : " f32"));
      sampling::Res2sLoopOptions o;
      o.legacy_mode = legacy;
      o.model_dtype = dt;
      HostMock cpu_mock, gpu_mock;
      const double mask = legacy ? -1 : 0.75;
      const AVState want = sampling::res2s_loop(schedule(), states(Device::cpu(), mask), cpu_mock.fn(), 7, o);
      const AVState got = sampling::res2s_loop(schedule(), states(kGpu, mask), gpu_mock.fn(), 7, o);
      ASSERT_EQ(got.video->latent.device(), kGpu);
      ASSERT_EQ(gpu_mock.inputs.size(), cpu_mock.inputs.size());
      for (size_t k = 0; k < cpu_mock.inputs.size(); ++k)
        EXPECT_TRUE(same_bytes(gpu_mock.inputs[k], cpu_mock.inputs[k])) << "denoiser input " << k;
      EXPECT_TRUE(same_bytes(got.video->latent, want.video->latent));
      EXPECT_TRUE(same_bytes(got.audio->latent, want.audio->latent));
    }
}

TEST(CudaRes2sLoop, ReadsNothingBackInsideItsSteps) {
  LTX_REQUIRE_CUDA();
  // A denoiser of device ops only: every read-back counted is the loop's.
  const sampling::Denoiser device_mock = [](const LatentState* v, const LatentState* a,
                                            const std::vector<double>& s, int64_t i) {
    const double shift = 0.05 * s.at(static_cast<size_t>(i));
    auto f = [&](const LatentState& st) {
      return ops::add(ops::mul(ops::tanh(st.latent.to(DType::F32)), 0.9), shift).to(st.latent.dtype());
    };
    DenoiseOutput out;
    if (v) out.video.denoised = f(*v);
    if (a) out.audio.denoised = f(*a);
    return out;
  };
  for (bool legacy : {true, false}) {
    sampling::Res2sLoopOptions o;
    o.legacy_mode = legacy;
    int64_t steps = 0;
    o.on_step = [&](int64_t done, int64_t) { steps = done; };
    const AVState st = states(kGpu, legacy ? -1 : 0.75);
    const int64_t before = device_to_host_copies();
    const AVState out = sampling::res2s_loop(schedule(), st, device_mock, 7, o);
    // Non-legacy mode reads each modality's mask once, before the first step.
    EXPECT_EQ(device_to_host_copies() - before, legacy ? 0 : 2) << (legacy ? "legacy" : "per-token");
    EXPECT_GT(steps, 1);
    EXPECT_EQ(out.video->latent.device(), kGpu);
  }
}

}  // namespace
}  // namespace ltx
