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

TEST(Decode, IntoMemoryNeedsNoEncoder) {
  const auto& b = test::shared_demo_bundle();
  const Tensor video = test::random_tensor({1, 16, 2, 2, 3}, 1);
  const Tensor audio = test::random_tensor({1, 2, 25, 16}, 2);
  generate::DecodeOptions opt;
  opt.fps = 25.0;
  // Tiles of 64 x 64 pixels: the 96-pixel width comes in two overlapping tiles, the frames in
  // one chunk; the sink gets whole frames.
  models::tiling::TileSizeConfig tiles;
  tiles.width = {64, 32};
  opt.tiling = tiles;
  generate::MemorySink sink;
  const generate::DecodeResult r = generate::decode_latents(video, audio, b.checkpoint,
                                                            b.checkpoint, sink, opt);
  const generate::DecodedMedia& m = sink.media();
  EXPECT_EQ(m.frames.shape(), (Shape{9, 64, 96, 3}));
  EXPECT_TRUE(m.frames.device().is_cpu());
  EXPECT_EQ(m.format.fps, 25.0);
  EXPECT_EQ(m.format.frames, 9);  // told at begin(), before any chunk
  EXPECT_EQ(m.format.audio_sample_rate, 48000);
  EXPECT_EQ(m.format.audio_channels, 2);
  ASSERT_TRUE(m.waveform.defined());
  EXPECT_EQ(m.waveform.shape(), (Shape{2, r.audio_samples}));
  // Without an audio latent the sink hears of no audio track.
  generate::MemorySink silent;
  generate::decode_latents(video, Tensor(), b.checkpoint, b.checkpoint, silent, opt);
  EXPECT_EQ(silent.media().frames.shape(), (Shape{9, 64, 96, 3}));
  EXPECT_FALSE(silent.media().waveform.defined());
  EXPECT_EQ(silent.media().format.audio_sample_rate, 0);
  // The sink got the tiles blended into whole frames: the same pixels as the first decode.
  EXPECT_ALLCLOSE(silent.media().frames, m.frames, 0.0);
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

// LTX-2.5's diffusion video decoder, selected from the VAE file's metadata (the tiny fixture takes
// 16-channel latents, like the demo transformer).
const char* const kDiffusionVae = "diffdec_ltx25.weights.safetensors";

TEST(Decode, DiffusionVaeDecodesToAnMp4WithItsAutomaticTiling) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto& b = test::shared_demo_bundle();
  test::TempDir dir;
  // 2 latent frames -> 9 pixel frames; 2 x 3 latent pixels -> 64 x 96.
  const Tensor video = test::random_tensor({1, 16, 2, 2, 3}, 6);
  const Tensor audio = test::random_tensor({1, 2, 10, 16}, 7);
  for (const bool tight : {false, true}) {
    generate::DecodeOptions opt;
    opt.fps = 25.0;
    // Tight: 2 GiB (weights floor + reserve) + the stage-4 feature (13 x 8 x 12 x 32 x 2 B) +
    // 2e6 B leaves room for (16 frames, 64, 64 px) tiles only (diffusion_tiling_test's arithmetic
    // at 9 frames): two overlapping width tiles blended.
    if (tight) opt.decode_free_bytes = (int64_t{2} << 30) + 13 * 8 * 12 * 32 * 2 + 2000000;
    const std::string out = dir.file(tight ? "tiled.mp4" : "whole.mp4");
    generate::Progress progress(nullptr, generate::Progress::Mode::Off);
    const generate::DecodeResult r = generate::decode_to_mp4(
        out, video, audio, test::fixture(kDiffusionVae), b.checkpoint, opt, &progress);
    EXPECT_EQ(r.frames, 9);
    EXPECT_EQ(r.height, 64);
    EXPECT_EQ(r.width, 96);
    ASSERT_EQ(progress.timings().size(), 2u);
    EXPECT_EQ(progress.timings()[1].stage, "video decode");
    test::expect_mp4(out, 96, 64, 9, "25/1", 48000);
  }
}

TEST(Decode, DiffusionVaeTilingErrorsNameTheFloor) {
  const auto& b = test::shared_demo_bundle();
  test::TempDir dir;
  const std::string out = dir.file("bad.mp4");
  const std::string vae = test::fixture(kDiffusionVae);
  const Tensor video = test::random_tensor({1, 16, 2, 2, 3}, 8);
  // A given layout below the decoder's 32 px overlap floor fails before any work.
  generate::DecodeOptions opt;
  models::tiling::TileSizeConfig cfg;
  cfg.width = {64, 16};
  opt.tiling = cfg;
  EXPECT_ERROR_HAS(generate::decode_to_mp4(out, video, Tensor(), vae, b.checkpoint, opt),
                   "decode: the video decode tiling");
  EXPECT_ERROR_HAS(generate::decode_to_mp4(out, video, Tensor(), vae, b.checkpoint, opt),
                   "does not suit the diffusion video decoder of '" + vae +
                       "' for 9 frames of 96x64: tiling: width overlap 16 px is below the "
                       "required 32 px");
  // Off the decoder's 8-pixel grid.
  cfg.width = {68, 32};
  opt.tiling = cfg;
  EXPECT_ERROR_HAS(generate::decode_to_mp4(out, video, Tensor(), vae, b.checkpoint, opt),
                   "width.tile_size must be divisible by 8");
  // No memory for any automatic layout.
  opt = {};
  opt.decode_free_bytes = 0;
  EXPECT_ERROR_HAS(generate::decode_to_mp4(out, video, Tensor(), vae, b.checkpoint, opt),
                   "no decode tile fits the memory budget");
  // Latents of another model.
  EXPECT_ERROR_HAS(generate::decode_to_mp4(out, test::random_tensor({1, 8, 1, 1, 1}, 9), Tensor(),
                                           vae, b.checkpoint),
                   "the video latent has 8 channels but the diffusion video VAE decoder");
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace ltx
