// A NaN or an infinity in the latents stops the generation with an error naming the stage, the
// step and the latent (sampling/non_finite_watch.h), on the tiny demo model with one broken weight.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "generate/generate_test_util.h"
#include "sampling/non_finite_watch.h"

namespace ltx {
namespace {

using test::TempDir;

// The generation's error, or "" when it finished; `steps` records the progress steps reached.
std::string generation_error(const generate::GenerateOptions& o, std::vector<std::string>* steps) {
  generate::MemorySink sink;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  progress.set_listener([&](const generate::ProgressEvent& e) {
    if (e.kind == generate::ProgressEvent::Kind::Step)
      steps->push_back(e.stage + ":" + std::to_string(e.done) + "/" + std::to_string(e.total));
  });
  try {
    generate::run_generation(o, progress, sink);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NonFiniteLatents, ANaNWeightStopsTheRunAtTheFirstStepNamingTheVideoLatent) {
  TempDir dir;
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.num_inference_steps = 3;
  o.demo_dir = test::demo_bundle_with_weight(dir.file("bundle"), "model.diffusion_model.proj_out.bias",
                                             std::numeric_limits<float>::quiet_NaN());
  std::vector<std::string> steps;
  const std::string err = generation_error(o, &steps);
  EXPECT_NE(err.find("stage 1: the video latent holds NaN or Inf values (the transformer's prediction "
                     "at step 1 of 3)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("nothing was written"), std::string::npos) << err;
  // Stopped inside step 1: no step was completed (on the CPU every prediction is read at once).
  EXPECT_EQ(steps, std::vector<std::string>{"stage 1:0/3"});
}

TEST(NonFiniteLatents, AnInfiniteAudioWeightNamesTheAudioLatent) {
  TempDir dir;
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.demo_dir = test::demo_bundle_with_weight(dir.file("bundle"), "model.diffusion_model.audio_proj_out.bias",
                                             std::numeric_limits<float>::infinity());
  std::vector<std::string> steps;
  const std::string err = generation_error(o, &steps);
  EXPECT_NE(err.find("stage 1: the audio latent holds NaN or Inf values (the transformer's prediction "
                     "at step 1 of 2)"),
            std::string::npos)
      << err;
}

TEST(NonFiniteWatch, HostTensorsAreCheckedAtOnce) {
  sampling::NonFiniteWatch watch("stage 2");
  EXPECT_NO_THROW(watch.check(Tensor::from_vector(std::vector<float>{1.f, -2.f, 3e38f, -3e38f}, Shape{4}), "video", "x"));
  EXPECT_NO_THROW(watch.check(Tensor(), "video", "an absent modality"));
  EXPECT_NO_THROW(watch.check(Tensor::full({3}, 2.5, DType::F64), "video", "an f64 state, through f32"));
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()}) {
    Tensor x = Tensor::zeros({2, 5, 3});
    x.data<float>()[17] = bad;
    try {
      watch.check(x, "audio", "after the last step, 8 of 8");
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stage 2: the audio latent holds NaN or Inf values (after the "
                                           "last step, 8 of 8)"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(watch.finish());  // nothing was kept for later
}

}  // namespace
}  // namespace ltx
