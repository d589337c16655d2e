// `ltx generate --pipeline dubit` through the binary (LTX_BINARY) on the built-in demo bundle: a
// reference clip with sound written by FFmpeg's own encoders (the README's one-line example end
// to end, checked with ffprobe), and bad media / flags (exit status 1, one `ltx: error:` line
// naming the flag, no output file).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/ffmpeg_tool.h"
#include "generate/generate_test_util.h"
#include "io/io_test_util.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::dubit_cli_test {
namespace {

namespace fs = std::filesystem;
using test::ffmpeg;
using test::ffmpeg_tool_unavailable;
using test::TempDir;

// `ltx generate` with the demo bundle in the test's own cache folder.
constexpr auto& generate = test::run_generate;

struct Clips {
  std::string with_sound, silent, sound_only, corrupt;
};

// with_sound: 11 frames of 96x64 at 24 fps (H.264) with a 0.5 s stereo AAC track at 48 kHz;
// silent: the same video without an audio stream; sound_only: the track alone; corrupt: an MP4
// cut short.
Clips make_clips(const TempDir& dir) {
  Clips c{dir.file("talk.mp4"), dir.file("silent.mp4"), dir.file("voice.m4a"), dir.file("corrupt.mp4")};
  EXPECT_TRUE(ffmpeg("testsrc=size=96x64:rate=24[out0];sine=frequency=220:sample_rate=48000[out1]",
                     "-frames:v 11 -t 0.5 -c:v libx264 -pix_fmt yuv420p -c:a aac -ac 2", c.with_sound));
  EXPECT_TRUE(ffmpeg("testsrc=size=96x64:rate=24", "-frames:v 11 -c:v libx264 -pix_fmt yuv420p", c.silent));
  EXPECT_TRUE(ffmpeg("sine=frequency=220:sample_rate=48000:duration=0.5", "-c:a aac -ac 2", c.sound_only));
  const auto bytes = fs::file_size(c.with_sound);
  fs::copy_file(c.with_sound, c.corrupt);
  fs::resize_file(c.corrupt, bytes / 3);
  return c;
}

TEST(DubItCli, DemoDubsAClipWithSound) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const Clips c = make_clips(dir);
  const std::string out = dir.file("dub.mp4");
  const test::CliResult r = generate(dir, {"--pipeline", "dubit", "--reference-video", c.with_sound, "--prompt",
                                           "a man says hello", "--output-path", out, "--height", "128", "--width",
                                           "128", "--reference-strength", "0.9"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("pipeline dubit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("audio encoder (reference voice)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("DubIt reference: 11 frames at 24 fps -> 9 frames"), std::string::npos) << r.err;
  // The IC-LoRA is fused for both stages.
  size_t loras = 0;
  for (size_t at = r.err.find("LoRAs of this stage"); at != std::string::npos; at = r.err.find("LoRAs of this stage", at + 1))
    ++loras;
  EXPECT_EQ(loras, 2u) << r.err;
  // The clip's frame count snapped to 8k + 1 and its rate; the generated speech as the track.
  test::expect_mp4(out, 128, 128, 9, "24/1", 48000);
}

TEST(DubItCli, BadMediaAndFlagsFailWithOneLineAndNoOutput) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const Clips c = make_clips(dir);
  const std::string out = dir.file("out.mp4");
  const std::string missing = dir.file("missing.mp4"), exr = dir.file("frame.exr");
  test::write_bytes(exr, "not an exr");
  fs::create_directories(dir.file("frames"));
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const auto dubit = [](std::vector<std::string> a) {
    a.insert(a.begin(), {"--pipeline", "dubit"});
    return a;
  };
  const std::vector<Case> cases = {
      {dubit({}), "--pipeline dubit needs --reference-video CLIP"},
      {dubit({"--reference-video", missing}), "--reference-video '" + missing + "': no such file"},
      {dubit({"--reference-video", dir.file("frames")}),
       "is a directory; pass a video file (fps and audio identity come from the container)"},
      {dubit({"--reference-video", exr}), "EXR is not supported"},
      {dubit({"--reference-video", c.corrupt}), "--reference-video '" + c.corrupt + "': cannot read the video"},
      {dubit({"--reference-video", c.sound_only}), "the file has no video stream"},
      {dubit({"--reference-video", c.silent}), "the file has no audio track"},
      {dubit({"--reference-video", c.with_sound, "--reference-strength", "1.5"}),
       "--reference-strength 1.5 must be in [0, 1]"},
      {dubit({"--reference-video", c.with_sound, "--reference-strength", "-0.1"}),
       "--reference-strength -0.1 must be in [0, 1]"},
      {dubit({"--reference-video", c.with_sound, "--num-frames", "9"}),
       "--num-frames: the dubit pipeline takes the frame count and frame rate of --reference-video"},
      {dubit({"--reference-video", c.with_sound, "--frame-rate", "25"}), "--frame-rate: the dubit pipeline takes"},
      {dubit({"--reference-video", c.with_sound, "--video-cfg-guidance-scale", "3"}),
       "the dubit pipeline runs the distilled 8 + 3 steps without guidance"},
      {{"--pipeline", "two-stage", "--reference-video", c.with_sound}, "--reference-video is a flag of --pipeline dubit"},
      {{"--reference-strength", "0.5"}, "--reference-strength is a flag of --pipeline dubit"},
  };
  for (const Case& k : cases) {
    std::vector<std::string> args = {"--prompt", "a cat", "--output-path", out, "--height", "128", "--width", "128"};
    args.insert(args.end(), k.args.begin(), k.args.end());
    const test::CliResult r = generate(dir, args);
    EXPECT_EQ(r.code, 1) << k.error << "\n" << r.err;
    EXPECT_NE(r.err.find(k.error), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << k.error;
  }
  // Checked before any model file is made or read.
  EXPECT_FALSE(fs::exists(dir.file("cache/ltx")));
}

}  // namespace
}  // namespace ltx::dubit_cli_test
