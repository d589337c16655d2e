// `ltx generate --pipeline retake` and `--pipeline keyframe-interpolation` (LTX_BINARY) on the
// built-in demo bundle: the README's one-line examples end to end (checked with ffprobe), and the
// retake flags' errors (exit status 1, one `ltx: error:` line naming the flag, no output file).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "generate/generate_test_util.h"
#include "io/io_test_util.h"
#include "media/image.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::retake_keyframe_cli_test {
namespace {

using test::TempDir;

// `ltx generate` with the demo bundle in the test's own cache folder.
constexpr auto& generate = test::run_generate;

int64_t error_lines(const std::string& err) {
  int64_t n = 0;
  for (size_t at = err.find("ltx: error:"); at != std::string::npos; at = err.find("ltx: error:", at + 1)) ++n;
  return n;
}

// A 9-frame 128x64 clip at 24 fps with an audio track: the distilled demo's output.
std::string demo_clip(const TempDir& dir) {
  const std::string clip = dir.file("clip.mp4");
  const test::CliResult r = generate(dir, {"--pipeline", "distilled", "--prompt", "a red ball", "--output-path", clip,
                                           "--num-frames", "9", "--height", "64", "--width", "128"});
  EXPECT_EQ(r.code, 0) << r.err;
  return clip;
}

TEST(RetakeCli, DemoRetakesAWindowOfAClip) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string clip = demo_clip(dir), out = dir.file("retake.mp4");
  const test::CliResult r = generate(dir, {"--pipeline", "retake", "--video-path", clip, "--start-time", "0.1",
                                           "--end-time", "0.3", "--prompt", "a blue ball", "--output-path", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("pipeline retake"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("audio encoder (source audio) runs on CPU"), std::string::npos) << r.err;
  // The clip's size, frame count and rate, with an audio track.
  test::expect_mp4(out, 128, 64, 9, "24/1", 48000);
}

TEST(KeyframeInterpolationCli, DemoInterpolatesBetweenTwoImages) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  std::vector<uint8_t> px(64 * 128 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 7) % 256);
  const std::string first = dir.file("first.png"), last = dir.file("last.png"), out = dir.file("kf.mp4");
  media::write_png(first, Tensor::from_vector(px, Shape{64, 128, 3}));
  std::reverse(px.begin(), px.end());
  media::write_png(last, Tensor::from_vector(px, Shape{64, 128, 3}));
  const test::CliResult r =
      generate(dir, {"--pipeline", "keyframe-interpolation", "--image", first, "0", "1.0", "--image", last, "8", "1.0",
                     "--prompt", "a ball rolls", "--output-path", out, "--num-frames", "9", "--height", "64",
                     "--width", "128", "--num-inference-steps", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("LoRAs of this stage"), std::string::npos) << "stage 2 fuses the distilled LoRA\n" << r.err;
  test::expect_mp4(out, 128, 64, 9, "24/1", 48000);
}

TEST(RetakeCli, BadFlagsAndClipsAreOneErrorNamingTheFlag) {
  TempDir dir;
  const std::string out = dir.file("out.mp4");
  const std::string junk = dir.file("junk.mp4");
  test::write_bytes(junk, "not a video");
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  // Checked before any file is read (no demo bundle is made for these).
  const std::vector<Case> early = {
      {{"--pipeline", "retake", "--start-time", "0.1", "--end-time", "0.2"}, "--pipeline retake needs --video-path"},
      {{"--pipeline", "retake", "--video-path", dir.file("missing.mp4"), "--start-time", "0", "--end-time", "0.2"},
       "missing.mp4': no such file"},
      {{"--pipeline", "retake", "--video-path", junk, "--start-time", "0.1"}, "needs --start-time and --end-time"},
      {{"--pipeline", "retake", "--video-path", junk, "--start-time", "0.3", "--end-time", "0.1"},
       "--end-time 0.1 must be greater than --start-time 0.3"},
      {{"--pipeline", "retake", "--video-path", junk, "--start-time", "0.2", "--end-time", "0.2"},
       "--end-time 0.2 must be greater than --start-time 0.2"},
      {{"--pipeline", "retake", "--video-path", junk, "--start-time", "-1", "--end-time", "0.2"},
       "--start-time -1 must be >= 0"},
      {{"--pipeline", "retake", "--video-path", junk, "--start-time", "0", "--end-time", "0.2", "--num-frames", "9"},
       "--num-frames: the retake pipeline takes the size, frame count and frame rate of --video-path"},
      {{"--pipeline", "retake", "--video-path", junk, "--start-time", "0", "--end-time", "0.2", "--video-cfg-guidance-scale",
        "3"},
       "runs the distilled schedule without guidance"},
      {{"--pipeline", "two-stage", "--video-path", junk}, "--video-path is a flag of --pipeline retake"},
      {{"--pipeline", "one-stage", "--start-time", "0.1"}, "--start-time is a flag of --pipeline retake"},
  };
  for (const Case& c : early) {
    std::vector<std::string> args = {"--prompt", "a cat", "--output-path", out};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const test::CliResult r = generate(dir, args);
    EXPECT_EQ(r.code, 1) << c.error << "\n" << r.err;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.error;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("cache/ltx")));

  // Found when the clip is read (before any model loads).
  std::vector<Case> late = {
      {{"--video-path", junk, "--start-time", "0", "--end-time", "0.2"}, "--video-path '" + junk + "': cannot read"},
  };
  if (test::mp4_check_unavailable().empty()) {
    const std::string clip = demo_clip(dir);  // 9 frames at 24 fps: 0.375 s
    late.push_back({{"--video-path", clip, "--start-time", "0.1", "--end-time", "0.5"},
                    "--end-time 0.5 s is past the end of the clip (9 frames at 24 fps = 0.375 s)"});
    late.push_back({{"--video-path", clip, "--start-time", "0.4", "--end-time", "0.5"}, "past the end of the clip"});
  }
  for (const Case& c : late) {
    std::vector<std::string> args = {"--prompt", "a cat", "--output-path", out, "--pipeline", "retake"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const test::CliResult r = generate(dir, args);
    EXPECT_EQ(r.code, 1) << c.error << "\n" << r.err;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << r.err;
    EXPECT_EQ(error_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.find("stage 1"), std::string::npos) << "the clip is checked before the denoising\n" << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.error;
  }
}

}  // namespace
}  // namespace ltx::retake_keyframe_cli_test
