// `ltx generate --pipeline ic-lora` and PNG output through the binary (LTX_BINARY) on the built-in
// demo bundle: reference clips written by FFmpeg's own encoder (the ffmpeg tool), the mask and
// --skip-stage-2 flags, PNG files read back with libpng (media::read_image), and bad media / flags
// (one error line naming the flag, exit status 1, no output).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/ffmpeg_tool.h"
#include "generate/demo_bundle.h"
#include "generate/generate_test_util.h"
#include "io/io_test_util.h"
#include "media/image.h"
#include "media/video_reader.h"
#include "media/preprocess.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::ic_lora_cli_test {
namespace {

namespace fs = std::filesystem;
using test::ffmpeg;
using test::ffmpeg_tool_unavailable;
using test::TempDir;

// `ltx generate` with the demo bundle in the test's own cache folder.
constexpr auto& generate = test::run_generate;

struct Clips {
  std::string color, mask, audio_only, corrupt, mpeg4;
};

Clips make_clips(const TempDir& dir) {
  Clips c{dir.file("color.mp4"), dir.file("mask.mp4"), dir.file("tone.m4a"), dir.file("corrupt.mp4"),
          dir.file("mpeg4.avi")};
  EXPECT_TRUE(ffmpeg("testsrc=size=96x64:rate=24", "-frames:v 30 -c:v libx264 -pix_fmt yuv420p", c.color));
  EXPECT_TRUE(ffmpeg("color=c=gray:size=64x48:rate=24", "-frames:v 30 -c:v libx264 -pix_fmt yuv420p", c.mask));
  EXPECT_TRUE(ffmpeg("sine=frequency=440:duration=0.5", "-c:a aac", c.audio_only));
  EXPECT_TRUE(ffmpeg("testsrc=size=96x64:rate=24", "-frames:v 12 -c:v mpeg4", c.mpeg4));
  // An MP4 cut short: its header promises data that is not there.
  {
    const auto bytes = fs::file_size(c.color);
    fs::copy_file(c.color, c.corrupt);
    fs::resize_file(c.corrupt, bytes / 3);
  }
  return c;
}

TEST(IcLoraVideoInput, ClipsFromFfmpegsEncoderDecodeAndPrepareAsTheReference) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const Clips c = make_clips(dir);
  // The first num_frames frames, full size, u8 RGB; an MPEG-4 Part 2 AVI reads the same way.
  const Tensor f = media::decode_video_frames(c.color, 9);
  ASSERT_EQ(f.shape(), (Shape{9, 64, 96, 3}));
  EXPECT_EQ(media::decode_video_frames(c.mpeg4).shape(), (Shape{12, 64, 96, 3}));
  // The gray clip: every pixel near 128 (limited-range BT.601 back to full range).
  const std::vector<float> g = media::decode_video_frames(c.mask, 2).to(DType::F32).to_float_vector();
  for (float v : g) ASSERT_NEAR(v, 128.0f, 2.0f);
  EXPECT_ERROR_HAS(media::decode_video_frames(c.audio_only), "no video stream");
  EXPECT_ERROR_HAS(media::decode_video_frames(c.corrupt), c.corrupt);
}

TEST(IcLoraCli, DemoRunsWithAClipAndWritesAnMp4) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const Clips c = make_clips(dir);
  const std::string out = dir.file("out.mp4");
  const test::CliResult r = generate(dir, {"--pipeline", "ic-lora", "--video-conditioning", c.color, "1.0", "--prompt",
                                           "a test pattern", "--output-path", out, "--num-frames", "9", "--height",
                                           "128", "--width", "128"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("LoRAs of this stage: "), std::string::npos) << r.err;  // the demo IC-LoRA, stage 1
  test::expect_mp4(out, 128, 128, 9, "24/1", 48000);
  EXPECT_TRUE(fs::exists(dir.file(str("cache/ltx/", generate::kDemoBundleVersion, "/ic-lora-demo.safetensors"))));
}

TEST(IcLoraCli, MaskAndSkipStage2WriteHalfSizePngFrames) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const Clips c = make_clips(dir);
  const std::string out = dir.file("frames.png");
  const test::CliResult r =
      generate(dir, {"--pipeline", "ic-lora", "--video-conditioning", c.color, "0.8", "--conditioning-attention-mask",
                     c.mask, "0.5", "--skip-stage-2", "--prompt", "a test pattern", "--output-path", out,
                     "--num-frames", "9", "--height", "128", "--width", "128"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Several frames: a folder named after the path without ".png", frames numbered from 0.
  EXPECT_FALSE(fs::exists(out));
  const std::string folder = dir.file("frames");
  ASSERT_TRUE(fs::is_directory(folder)) << r.err;
  int64_t n = 0;
  for (const auto& e : fs::directory_iterator(folder)) n += e.path().extension() == ".png";
  EXPECT_EQ(n, 9);
  EXPECT_EQ(media::read_image(folder + "/frame_00008.png").shape(), (Shape{64, 64, 3}));
  EXPECT_NE(r.err.find("audio track is not written"), std::string::npos) << r.err;
}

TEST(PngOutput, OneFrameIsTextToImage) {
  TempDir dir;
  const std::string out = dir.file("still.png");
  const test::CliResult r = generate(dir, {"--pipeline", "distilled", "--num-frames", "1", "--prompt", "a red ball",
                                           "--output-path", out, "--height", "128", "--width", "192"});
  ASSERT_EQ(r.code, 0) << r.err;
  const Tensor im = media::read_image(out);
  EXPECT_EQ(im.shape(), (Shape{128, 192, 3}));
  // --output-format png with another extension: the path as given.
  const std::string named = dir.file("still.image");
  const test::CliResult r2 = generate(dir, {"--pipeline", "distilled", "--num-frames", "1", "--prompt", "a red ball",
                                            "--output-path", named, "--output-format", "png", "--height", "128",
                                            "--width", "128"});
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_EQ(media::read_image(named).shape(), (Shape{128, 128, 3}));
}

TEST(IcLoraCli, BadMediaAndFlagsFailWithOneLineAndNoOutput) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const Clips c = make_clips(dir);
  const std::string out = dir.file("out.mp4");
  const std::string missing = dir.file("missing.mp4");
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<std::string> ic = {"--pipeline", "ic-lora"};
  auto with = [&](std::vector<std::string> a) {
    std::vector<std::string> v = ic;
    v.insert(v.end(), a.begin(), a.end());
    return v;
  };
  const std::vector<Case> cases = {
      {with({"--video-conditioning", c.corrupt, "1"}), "--video-conditioning '" + c.corrupt + "': cannot read the video"},
      {with({"--video-conditioning", c.audio_only, "1"}), "the file has no video stream"},
      {with({"--video-conditioning", missing, "1"}), "--video-conditioning '" + missing + "': no such file"},
      {with({"--video-conditioning", c.color, "1.5"}), "STRENGTH 1.5 must be in [0, 1]"},
      {with({"--video-conditioning", c.color}), "--video-conditioning takes PATH STRENGTH, got 1 values"},
      {with({"--video-conditioning", c.color, "1", "--conditioning-attention-mask", c.audio_only, "0.5"}),
       "--conditioning-attention-mask '" + c.audio_only + "': cannot read the video"},
      {with({"--video-conditioning", c.color, "1", "--conditioning-attention-mask", c.mask, "2"}),
       "--conditioning-attention-mask '" + c.mask + "': STRENGTH 2 must be in [0, 1]"},
      {with({}), "--pipeline ic-lora needs a reference video"},
      {with({"--video-conditioning", c.color, "1", "--video-cfg-guidance-scale", "3"}),
       "the ic-lora pipeline runs the distilled 8 + 3 steps without guidance"},
      {{"--video-conditioning", c.color, "1"}, "--video-conditioning is a flag of --pipeline ic-lora and --pipeline hdr-ic-lora"},
      {{"--skip-stage-2"}, "--skip-stage-2 is a flag of --pipeline ic-lora"},
      {{"--output-format", "gif"}, "--output-format 'gif' is not a known format: expected one of mp4, wav, png, exr"},
  };
  for (const Case& k : cases) {
    std::vector<std::string> args = {"--prompt", "a cat", "--output-path", out, "--num-frames", "9",
                                     "--height", "128", "--width", "128"};
    args.insert(args.end(), k.args.begin(), k.args.end());
    const test::CliResult r = generate(dir, args);
    EXPECT_EQ(r.code, 1) << k.error << "\n" << r.err;
    EXPECT_NE(r.err.find(k.error), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << k.error;
  }
}

}  // namespace
}  // namespace ltx::ic_lora_cli_test
