#include "generate/decode.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "generate/generate_test_util.h"
#include "generate/progress.h"
#include "support/test_support.h"

namespace ltx {
namespace {

TEST(Decode, LatentsBecomeAnMp4WithTheVideoAndTheVocoderAudio) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto& b = test::shared_demo_bundle();
  test::TempDir dir;
  const std::string out = dir.file("sub/out.mp4");
  // 2 latent frames -> 9 pixel frames; 2 x 3 latent pixels -> 64 x 96; 1 s of audio latents.
  const Tensor video = test::random_tensor({1, 16, 2, 2, 3}, 1);
  const Tensor audio = test::random_tensor({1, 2, 25, 16}, 2);
  generate::DecodeOptions opt;
  opt.fps = 25.0;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  const generate::DecodeResult r =
      generate::decode_to_mp4(out, video, audio, b.checkpoint, b.checkpoint, opt, &progress);
  EXPECT_EQ(r.frames, 9);
  EXPECT_EQ(r.height, 64);
  EXPECT_EQ(r.width, 96);
  EXPECT_EQ(r.audio_sample_rate, 48000);
  EXPECT_GT(r.audio_samples, 40000);  // 25 latents ~ 1 s (causal: 4 T - 3 mel frames)
  ASSERT_EQ(progress.timings().size(), 2u);
  EXPECT_EQ(progress.timings()[0].stage, "audio decode");
  EXPECT_EQ(progress.timings()[1].stage, "video decode");

  test::expect_mp4(out, 96, 64, 9, "25/1", 48000);
}

TEST(Decode, SilentVideoWithoutAudioLatent) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto& b = test::shared_demo_bundle();
  test::TempDir dir;
  const std::string out = dir.file("silent.mp4");
  const generate::DecodeResult r = generate::decode_to_mp4(
      out, test::random_tensor({1, 16, 1, 1, 1}, 3), Tensor(), b.checkpoint, b.checkpoint);
  EXPECT_EQ(r.frames, 1);
  EXPECT_EQ(r.audio_samples, 0);
  test::expect_mp4(out, 32, 32, 1, "24/1", 0);
}

TEST(Decode, AFailureLeavesNoFile) {
  const auto& b = test::shared_demo_bundle();
  test::TempDir dir;
  const std::string out = dir.file("bad.mp4");
  // 8 latent channels do not fit the 16-channel decoder.
  EXPECT_ERROR_HAS(generate::decode_to_mp4(out, test::random_tensor({1, 8, 1, 1, 1}, 4), Tensor(),
                                           b.checkpoint, b.checkpoint),
                   "the video latent has 8 channels but the video VAE decoder");
  EXPECT_ERROR_HAS(generate::decode_to_mp4(out, test::random_tensor({1, 16, 1, 1}, 4), Tensor(),
                                           b.checkpoint, b.checkpoint),
                   "the video latent must be [1, C, F, H, W]");
  EXPECT_ERROR_HAS(
      generate::decode_to_mp4(out, test::random_tensor({1, 16, 1, 1, 1}, 4),
                              test::random_tensor({1, 3, 5, 16}, 5), b.checkpoint, b.checkpoint),
      "the audio latent has 3 channels but the audio VAE decoder");
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

}  // namespace
}  // namespace ltx
