// The NaN / Inf check of the denoising loops on a GPU (sampling/non_finite_watch.h): the sums stay
// on the device during the loop and are read once when it ends, naming the first bad step.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "generate/generate_test_util.h"
#include "sampling/non_finite_watch.h"

namespace ltx {
namespace {

TEST(CudaNonFiniteWatch, DeviceSumsAreReadOnceWhenTheLoopEnds) {
  LTX_REQUIRE_CUDA();
  for (const DType dt : {DType::F32, DType::BF16}) {
    sampling::NonFiniteWatch watch("stage 1");
    std::vector<float> v(4096, 0.5f);
    const Tensor good = Tensor::from_vector(v, Shape{2, 2048}).to(test::kGpu, dt);
    v[3000] = std::numeric_limits<float>::quiet_NaN();
    const Tensor nan = Tensor::from_vector(v, Shape{2, 2048}).to(test::kGpu, dt);
    v[3000] = std::numeric_limits<float>::infinity();
    const Tensor inf = Tensor::from_vector(v, Shape{2, 2048}).to(test::kGpu, dt);
    const int64_t before = device_to_host_copies();
    watch.check(good, "video", "step 1");
    watch.check(nan, "audio", "step 2");  // the first bad one
    watch.check(inf, "video", "step 3");
    EXPECT_EQ(device_to_host_copies(), before) << "a read-back inside the loop";
    try {
      watch.finish();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stage 1: the audio latent holds NaN or Inf values (step 2)"),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(device_to_host_copies(), before + 1);
    sampling::NonFiniteWatch healthy("stage 2");
    healthy.check(good, "video", "step 1");
    EXPECT_NO_THROW(healthy.finish());
  }
}

// The demo with a NaN weight on the GPU: the run ends when stage 1's loop does, with the step the
// NaN first appeared at; the steps themselves read nothing back.
TEST(CudaNonFiniteWatch, ANaNWeightOnTheGpuNamesStageStepAndLatent) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.device = test::kGpu;
  o.num_inference_steps = 3;
  o.demo_dir = test::demo_bundle_with_weight(dir.file("bundle"), "model.diffusion_model.proj_out.bias",
                                             std::numeric_limits<float>::quiet_NaN());
  generate::MemorySink sink;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  std::string err;
  try {
    generate::run_generation(o, progress, sink);
  } catch (const Error& e) {
    err = e.what();
  }
  progress.end_stage();
  EXPECT_NE(err.find("stage 1: the video latent holds NaN or Inf values (the transformer's prediction "
                     "at step 1 of 3)"),
            std::string::npos)
      << err;
  for (const auto& t : progress.timings()) {
    if (t.stage == "stage 1") {
      EXPECT_EQ(t.step_read_backs, 0);
    }
  }
}

}  // namespace
}  // namespace ltx
