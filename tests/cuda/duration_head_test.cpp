// The LTX-2.5 duration head on CUDA (it reads the prompt contexts where the text encoder left
// them on `ltx generate --device cuda`) against the CPU, in f32 on the fixture head.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "models/duration_head/duration_head.h"
#include "models/duration_head/duration_predictor.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace dh = models::duration_head;

TEST(DurationHeadOnCuda, PredictsTheCpuDurationInF32) {
  LTX_REQUIRE_CUDA();
  const std::string path = test::fixture("duration_ltx25.weights.safetensors");
  const dh::DurationHead cpu = dh::DurationHead::from_file(path);
  const dh::DurationHead gpu = dh::DurationHead::from_file(path, {DType::F32, test::kGpu});
  // The fixture's widths: video contexts 64, audio 32.
  const Tensor video = test::random_tensor({1, 7, 64}, 1), audio = test::random_tensor({1, 5, 32}, 2);
  const Tensor want = cpu.log_seconds(video, audio);
  const Tensor got = gpu.log_seconds(video.to(test::kGpu), audio.to(test::kGpu));
  EXPECT_TRUE(got.device().is_cuda());
  EXPECT_TRUE(test::near(got, want, 1e-5, 1e-5));
  EXPECT_NEAR(dh::predict_seconds(gpu, video.to(test::kGpu), Tensor()),
              dh::predict_seconds(cpu, video, Tensor()), 1e-5 * dh::predict_seconds(cpu, video, Tensor()));
}

}  // namespace
}  // namespace ltx
