// `ltx generate --hdr {SRGB_LINEAR,ACESCG,ACESCCT}` through the binary (LTX_BINARY) on the built-in
// demo bundle, as the reference's add_hdr_args / _verify_media_path_args / encode_video with a
// colour space: an EXR still (distilled), an EXR-frame folder retaken (with --frame-rate) and an
// EXR folder as an IC-LoRA reference give the HLG BT.2020 master at the output path (probed with
// libav) and the half-float EXR frames beside it (their colorSpace tag read back with OpenEXR);
// the media path rules, --hdr's own errors and an EXR still without R G B channels are one line
// naming the flag (and file), exit 1, no output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "generate/generate_test_util.h"
#include "io/io_test_util.h"
#include "media/exr.h"
#include "media/support.h"
#include "media/video_reader.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

#if LTX_TEST_OPENEXR
#include <ImfChannelList.h>
#include <ImfFrameBuffer.h>
#include <ImfHeader.h>
#include <ImfInputFile.h>
#include <ImfOutputFile.h>
#include <ImfStringAttribute.h>
#endif

namespace ltx {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr auto& generate = test::run_generate;

std::string hdr_unavailable() {
  if (!media::openexr_available()) return "this build has no OpenEXR (LTX_OPENEXR=OFF)";
  if (!media::ffmpeg_available()) return "this build has no FFmpeg (LTX_FFMPEG=OFF)";
  return "";
}

// Scene-linear test values with highlights above 1 (a plate shot in HDR).
Tensor linear_frames(int64_t frames, int64_t h, int64_t w) {
  Tensor t = Tensor::empty({frames, h, w, 3}, DType::F32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = 0.18f + 0.15f * std::sin(0.013f * static_cast<float>(i)) + (i % 97 == 0 ? 6.0f : 0.0f);
  return t;
}

#if LTX_TEST_OPENEXR
std::string exr_color_space(const std::string& path) {
  Imf::InputFile in(path.c_str());
  const auto* cs = in.header().findTypedAttribute<Imf::StringAttribute>("colorSpace");
  return cs ? cs->value() : std::string("(none)");
}
#endif

// The master at `mp4` and `frames` EXR frames in <stem>_exr/ tagged `tag`.
void expect_hdr_outputs(const std::string& mp4, int64_t width, int64_t height, int64_t frames, bool audio,
                        const std::string& tag) {
  const media::MediaInfo info = media::probe_media(mp4);
  const media::StreamInfo* v = nullptr;
  bool has_audio = false;
  for (const media::StreamInfo& s : info.streams) {
    if (s.type == "video") v = &s;
    has_audio = has_audio || s.type == "audio";
  }
  ASSERT_NE(v, nullptr) << mp4;
  EXPECT_EQ(v->codec, "hevc");
  EXPECT_EQ(v->pixel_format, "yuv420p10le");
  EXPECT_EQ(v->color_primaries, "bt2020");
  EXPECT_EQ(v->color_transfer, "arib-std-b67");
  EXPECT_EQ(v->width, width);
  EXPECT_EQ(v->height, height);
  EXPECT_EQ(has_audio, audio);
  const fs::path p(mp4);
  const std::string exr_dir = (p.parent_path() / (p.stem().string() + "_exr")).string();
  const std::vector<std::string> files = media::exr_frame_paths(exr_dir);
  ASSERT_EQ(static_cast<int64_t>(files.size()), frames) << exr_dir;
  EXPECT_EQ(fs::path(files.front()).filename().string(), "frame_00000.exr");
  const Tensor last = media::read_exr(files.back());
  EXPECT_EQ(last.shape(), (Shape{height, width, 3}));
  for (float x : last.to_float_vector()) ASSERT_TRUE(std::isfinite(x) && x >= 0.0f);
#if LTX_TEST_OPENEXR
  EXPECT_EQ(exr_color_space(files.front()), tag);
#else
  (void)tag;
#endif
}

TEST(HdrFlagCli, AnExrStillGivesTheHlgMasterAndExrFrames) {
  if (const std::string why = hdr_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string plate = dir.file("plate.EXR"), out = dir.file("shot.mp4");
  media::write_exr(plate, linear_frames(1, 48, 80).select(0, 0));
  const test::CliResult r =
      generate(dir, {"--pipeline", "distilled", "--image", plate, "0", "1.0", "--hdr", "srgb_linear", "--prompt",
                     "a plate", "--num-frames", "9", "--height", "64", "--width", "128", "--output-path", out});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_hdr_outputs(out, 128, 64, 9, /*audio=*/true, "sRGB");
}

TEST(HdrFlagCli, RetakesAnExrFolderAtTheGivenFrameRate) {
  if (const std::string why = hdr_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string seq = dir.file("seq"), out = dir.file("retake.mp4");
  media::write_exr_frames(seq, linear_frames(9, 64, 96));
  const test::CliResult r =
      generate(dir, {"--pipeline", "retake", "--video-path", seq, "--frame-rate", "24", "--start-time", "0.1",
                     "--end-time", "0.3", "--hdr", "ACESCCT", "--prompt", "a blue ball", "--output-path", out});
  ASSERT_EQ(r.code, 0) << r.err;
  // An EXR folder has no audio track: the retake generates the sound (no audio encoder).
  EXPECT_EQ(r.err.find("audio encoder"), std::string::npos) << r.err;
  expect_hdr_outputs(out, 96, 64, 9, /*audio=*/true, "ACEScct");
}

TEST(HdrFlagCli, AnExrFolderIsAnIcLoraReference) {
  if (const std::string why = hdr_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string seq = dir.file("depth"), out = dir.file("ic.mp4");
  media::write_exr_frames(seq, linear_frames(9, 64, 64));
  const test::CliResult r =
      generate(dir, {"--pipeline", "ic-lora", "--video-conditioning", seq, "1.0", "--hdr", "ACESCG", "--prompt",
                     "a test pattern", "--num-frames", "9", "--height", "128", "--width", "128", "--output-path", out});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_hdr_outputs(out, 128, 128, 9, /*audio=*/true, "ACEScg");
}

TEST(HdrFlagCli, MediaPathRulesAreOneErrorNamingTheFlag) {
  TempDir dir;
  const std::string out = dir.file("out.mp4");
  const std::string plate = dir.file("plate.exr"), png = dir.file("a.png"), clip = dir.file("clip.mp4");
  const std::string seq = dir.file("seq"), empty = dir.file("empty");
  test::write_bytes(plate, "not read before the checks");
  test::write_bytes(png, "not read before the checks");
  test::write_bytes(clip, "not read before the checks");
  fs::create_directories(seq);
  test::write_bytes(seq + "/frame_00000.exr", "x");
  fs::create_directories(empty);
  fs::create_directories(dir.file("busy_exr"));
  test::write_bytes(dir.file("busy_exr/frame_00000.exr"), "x");
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"--image", plate, "0", "1"}, "EXR input requires --hdr {SRGB_LINEAR,ACESCG,ACESCCT} to declare the source"},
      {{"--image", seq, "0", "1", "--hdr", "ACESCG"}, "is a directory; pass a still file (.exr or PNG/JPEG)"},
      {{"--image", plate, "0", "1", "--hdr", "pq"}, "invalid --hdr 'pq'; choose from SRGB_LINEAR, ACESCG, ACESCCT"},
      {{"--pipeline", "t2a", "--hdr", "ACESCG", "--output-path", dir.file("a.wav")},
       "--hdr is not a flag of --pipeline t2a"},
      {{"--pipeline", "dfr", "--hdr", "ACESCG"}, "the reference's dfr script parses it but never applies it"},
      {{"--pipeline", "dubit", "--reference-video", seq}, "--reference-video '" + seq + "' must be a video file"},
      {{"--pipeline", "ic-lora", "--video-conditioning", plate, "1", "--hdr", "ACESCG"},
       "is a single .exr file; pass a directory of *.exr frames."},
      {{"--pipeline", "ic-lora", "--video-conditioning", empty, "1"}, "is a directory without *.exr frames."},
      {{"--pipeline", "ic-lora", "--video-conditioning", clip, "1", "--image", plate, "0", "1", "--hdr", "ACESCG"},
       "--image / --video-conditioning must be all EXR or all SDR; got mixed: --image '" + plate + "' (EXR)"},
      {{"--pipeline", "retake", "--video-path", seq, "--start-time", "0", "--end-time", "0.2", "--hdr", "ACESCG"},
       "is an EXR-frame folder; --frame-rate is required"},
      {{"--pipeline", "retake", "--video-path", clip, "--start-time", "0", "--end-time", "0.2", "--frame-rate", "24"},
       "--frame-rate is only valid when --video-path is an EXR-frame folder"},
      {{"--pipeline", "retake", "--video-path", seq, "--frame-rate", "24", "--start-time", "0", "--end-time", "0.2"},
       "EXR input requires --hdr"},
      {{"--image", png, "0", "1", "--hdr", "ACESCG", "--output-path", dir.file("x.png")},
       "--hdr writes an HLG BT.2020 master MP4"},
      {{"--hdr", "ACESCG", "--output-path", dir.file("busy.mp4")}, "busy_exr', which exists and is not an empty"},
  };
  for (const Case& k : cases) {
    std::vector<std::string> args = {"--prompt", "a ball"};
    args.insert(args.end(), k.args.begin(), k.args.end());
    if (std::find(args.begin(), args.end(), "--output-path") == args.end()) {
      args.push_back("--output-path");
      args.push_back(out);
    }
    const test::CliResult r = generate(dir, args);
    EXPECT_EQ(r.code, 1) << k.error << "\n" << r.err;
    EXPECT_NE(r.err.find(k.error), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << k.error;
    EXPECT_FALSE(fs::exists(dir.file("out_exr"))) << k.error;
  }
}

TEST(HdrFlagCli, AnExrStillWithoutRgbChannelsIsOneErrorNamingTheFlagAndFile) {
  if (const std::string why = hdr_unavailable(); !why.empty()) GTEST_SKIP() << why;
#if LTX_TEST_OPENEXR
  TempDir dir;
  // R and G only (a two-channel plate): not an image the VAE can take.
  const std::string plate = dir.file("rg.exr"), out = dir.file("out.mp4");
  {
    Imf::Header header(8, 8);
    header.channels().insert("R", Imf::Channel(Imf::FLOAT));
    header.channels().insert("G", Imf::Channel(Imf::FLOAT));
    std::vector<float> zeros(64, 0.0f);
    Imf::FrameBuffer fb;
    for (const char* c : {"R", "G"})
      fb.insert(c, Imf::Slice(Imf::FLOAT, reinterpret_cast<char*>(zeros.data()), sizeof(float), 8 * sizeof(float)));
    Imf::OutputFile file(plate.c_str(), header);
    file.setFrameBuffer(fb);
    file.writePixels(8);
  }
  const test::CliResult r = generate(dir, {"--pipeline", "distilled", "--image", plate, "0", "1", "--hdr", "SRGB_LINEAR",
                                           "--prompt", "a ball", "--output-path", out});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("--image '" + plate + "'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("needs the channels R, G and B"), std::string::npos) << r.err;
  // One error line, the last (the demo bundle's notes come before it).
  const size_t error_at = r.err.find("ltx: error: ");
  ASSERT_NE(error_at, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n', error_at), r.err.size() - 1) << r.err;
  EXPECT_EQ(r.err.find("error: ", error_at + 12), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(dir.file("out_exr")));
#else
  GTEST_SKIP() << "the test writes its EXR with OpenEXR's API (LTX_OPENEXR)";
#endif
}

}  // namespace
}  // namespace ltx
