// `ltx generate --pipeline hdr-ic-lora` through the binary (LTX_BINARY) on the built-in demo
// bundle: an SDR clip written by FFmpeg's own encoder (the ffmpeg tool) in, the reference's outputs
// out (hdr_ic_lora.py _process_single_video): the EXR frame folder, read back with OpenEXR's own
// API (channels, pixel type, compression, colour tags, frame count), and the sRGB H.264 preview,
// probed and decoded with libav; --high-quality with --skip-mp4 and --spatial-tile (the clip named
// by the reference's --input); bad flags and
// media (one error line naming the flag, exit status 1, nothing written).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/ffmpeg_tool.h"
#include "generate/demo_bundle.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "media/support.h"
#include "media/video_reader.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

#if LTX_TEST_OPENEXR
#include <ImfChannelList.h>
#include <ImfFrameBuffer.h>
#include <ImfHeader.h>
#include <ImfInputFile.h>
#include <ImfStandardAttributes.h>
#include <ImfStringAttribute.h>
#endif

namespace ltx {
namespace {

namespace fs = std::filesystem;
using test::ffmpeg;
using test::ffmpeg_tool_unavailable;
using test::TempDir;

// `ltx generate` with the demo bundle in the test's own cache folder.
constexpr auto& generate = test::run_generate;

// A 96x64 SDR test pattern at NTSC's 30000/1001 fps, 12 frames, H.264 from FFmpeg's libx264.
std::string make_clip(const TempDir& dir) {
  const std::string clip = dir.file("shot.mp4");
  EXPECT_TRUE(ffmpeg("testsrc=size=96x64:rate=30000/1001", "-frames:v 12 -c:v libx264 -pix_fmt yuv420p", clip));
  return clip;
}

std::vector<std::string> sorted_names(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> frame_names(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "frame_%05d.exr", i);
    names.emplace_back(buf);
  }
  return names;
}

#if LTX_TEST_OPENEXR
// One EXR frame as OpenEXR reads it: its header checked against what the reference's
// save_exr_tensor(half=True) writes, the RGB values as float [H * W * 3].
std::vector<float> read_exr_frame_checked(const std::string& path, int width, int height) {
  Imf::InputFile in(path.c_str());
  const Imf::Header& hd = in.header();
  std::vector<std::string> channels;
  for (auto it = hd.channels().begin(); it != hd.channels().end(); ++it) {
    channels.emplace_back(it.name());
    EXPECT_EQ(it.channel().type, Imf::HALF) << path << " " << it.name();
  }
  EXPECT_EQ(channels, (std::vector<std::string>{"B", "G", "R"})) << path;  // OpenEXR lists them sorted
  EXPECT_EQ(hd.compression(), Imf::ZIP_COMPRESSION) << path;
  const auto* cs = hd.findTypedAttribute<Imf::StringAttribute>("colorSpace");
  EXPECT_TRUE(cs && cs->value() == "sRGB") << path;
  EXPECT_TRUE(Imf::hasChromaticities(hd)) << path;
  if (Imf::hasChromaticities(hd)) {
    // Rec.709 / sRGB primaries, D65 white.
    const Imf::Chromaticities c = Imf::chromaticities(hd);
    EXPECT_NEAR(c.red.x, 0.64f, 1e-6f);
    EXPECT_NEAR(c.red.y, 0.33f, 1e-6f);
    EXPECT_NEAR(c.green.x, 0.30f, 1e-6f);
    EXPECT_NEAR(c.green.y, 0.60f, 1e-6f);
    EXPECT_NEAR(c.blue.x, 0.15f, 1e-6f);
    EXPECT_NEAR(c.blue.y, 0.06f, 1e-6f);
    EXPECT_NEAR(c.white.x, 0.3127f, 1e-6f);
    EXPECT_NEAR(c.white.y, 0.3290f, 1e-6f);
  }
  const Imath::Box2i dw = hd.dataWindow();
  EXPECT_EQ(dw.max.x - dw.min.x + 1, width) << path;
  EXPECT_EQ(dw.max.y - dw.min.y + 1, height) << path;
  const int w = dw.max.x - dw.min.x + 1, h = dw.max.y - dw.min.y + 1;
  std::vector<float> px(static_cast<size_t>(w) * h * 3);
  char* base = reinterpret_cast<char*>(px.data()) -
               (static_cast<ptrdiff_t>(dw.min.x) + static_cast<ptrdiff_t>(dw.min.y) * w) * 3 * sizeof(float);
  Imf::FrameBuffer fb;
  const size_t xs = 3 * sizeof(float), ys = xs * w;
  fb.insert("R", Imf::Slice(Imf::FLOAT, base, xs, ys));
  fb.insert("G", Imf::Slice(Imf::FLOAT, base + sizeof(float), xs, ys));
  fb.insert("B", Imf::Slice(Imf::FLOAT, base + 2 * sizeof(float), xs, ys));
  in.setFrameBuffer(fb);
  in.readPixels(dw.min.y, dw.max.y);
  return px;
}

// The reference preview's 8-bit value of a linear value: clamped, the sRGB OETF, x * 255 + 0.5.
int srgb8(float linear) {
  const double x = std::clamp(static_cast<double>(linear), 0.0, 1.0);
  const double s = x <= 0.0031308 ? x * 12.92 : 1.055 * std::pow(x, 1.0 / 2.4) - 0.055;
  return static_cast<int>(s * 255.0 + 0.5);
}
#endif

TEST(HdrIcLoraCli, DemoWritesTheExrFolderAndTheSrgbPreview) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  if (!media::openexr_available()) GTEST_SKIP() << "this build has no OpenEXR (LTX_OPENEXR=OFF)";
  TempDir dir;
  const std::string clip = make_clip(dir);
  const std::string out = dir.file("out");
  const test::CliResult r = generate(dir, {"--pipeline", "hdr-ic-lora", "--video-conditioning", clip, "--prompt",
                                           "a test pattern", "--num-frames", "9", "--output-path", out + "/"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("LoRAs of this stage: "), std::string::npos) << r.err;  // the demo HDR IC-LoRA
  EXPECT_NE(r.err.find("wrote " + out + "/shot_exr: 9 frames of 96x64 at 29.97"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir.file(str("cache/ltx/", generate::kDemoBundleVersion, "/hdr-ic-lora-demo.safetensors"))));
  // The reference's layout: <clip>_exr/ and <clip>.mp4 in the output folder, nothing else.
  EXPECT_EQ(sorted_names(out), (std::vector<std::string>{"shot.mp4", "shot_exr"}));
  ASSERT_EQ(sorted_names(out + "/shot_exr"), frame_names(9));

  // The preview, through libav: H.264 yuv420p at the clip's size and exact rate (not int(fps) as
  // the MP4 output of the other pipelines), one frame per EXR.
  const media::MediaInfo info = media::probe_media(out + "/shot.mp4");
  ASSERT_EQ(info.streams.size(), 1u);
  const media::StreamInfo& v = info.streams[0];
  EXPECT_EQ(v.type, "video");
  EXPECT_EQ(v.codec, "h264");
  EXPECT_EQ(v.pixel_format, "yuv420p");
  EXPECT_EQ(v.width, 96);
  EXPECT_EQ(v.height, 64);
  EXPECT_NEAR(v.fps, 30000.0 / 1001.0, 1e-3);  // the container's average of 9 frames
  const Tensor preview = media::decode_video_frames(out + "/shot.mp4");
  ASSERT_EQ(preview.shape(), (Shape{9, 64, 96, 3}));

#if LTX_TEST_OPENEXR
  // Every frame as OpenEXR reads it; the preview shows the frames' clamped sRGB values. The demo's
  // frames are noise, which H.264 (4:2:0, crf 18) does not keep pixel by pixel: each frame's mean
  // per channel is compared (the coding noise of the many pixels clipped at white pulls the
  // preview's means down a few steps; a linear or unclamped preview would be tens of steps off).
  const std::vector<float> shown = preview.to(DType::F32).to_float_vector();
  double worst = 0;
  bool finite = true, above_one = false;
  for (int f = 0; f < 9; ++f) {
    const std::vector<float> px = read_exr_frame_checked(out + "/shot_exr/" + frame_names(9)[f], 96, 64);
    double want[3] = {0, 0, 0}, got[3] = {0, 0, 0};
    for (size_t i = 0; i < px.size(); ++i) {
      finite = finite && std::isfinite(px[i]);
      above_one = above_one || px[i] > 1.0f;
      want[i % 3] += srgb8(px[i]);
      got[i % 3] += shown[f * px.size() + i];
    }
    for (int c = 0; c < 3; ++c) worst = std::max(worst, std::abs(want[c] - got[c]) / (px.size() / 3.0));
  }
  EXPECT_TRUE(finite);
  EXPECT_TRUE(above_one) << "no value above 1: the EXR frames must keep the highlights unclamped";
  EXPECT_LT(worst, 8.0) << "largest |frame mean of the preview - of sRGB(EXR)| per channel, 8-bit steps";
#endif
}

TEST(HdrIcLoraCli, HighQualityWithSkipMp4WritesTheFramesOnly) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  if (!media::openexr_available()) GTEST_SKIP() << "this build has no OpenEXR (LTX_OPENEXR=OFF)";
  TempDir dir;
  const std::string clip = make_clip(dir);
  const std::string out = dir.file("hq");
  const test::CliResult r =
      generate(dir, {"--pipeline", "hdr-ic-lora", "--input", clip, "--prompt", "a test pattern",
                     "--num-frames", "9", "--high-quality", "--skip-mp4", "--spatial-tile", "512", "--seed", "3",
                     "--output-path", out, "--output-format", "exr"});
  ASSERT_EQ(r.code, 0) << r.err;
  // 17 frames generated, every other one kept.
  EXPECT_NE(r.err.find("high quality"), std::string::npos) << r.err;
  EXPECT_EQ(sorted_names(out), (std::vector<std::string>{"shot_exr"}));
  EXPECT_EQ(sorted_names(out + "/shot_exr"), frame_names(9));
#if LTX_TEST_OPENEXR
  read_exr_frame_checked(out + "/shot_exr/frame_00008.exr", 96, 64);
#endif
}

TEST(HdrIcLoraCli, PrecomputedTextEmbeddingsReplaceThePrompt) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  if (!media::openexr_available()) GTEST_SKIP() << "this build has no OpenEXR (LTX_OPENEXR=OFF)";
  TempDir dir;
  const std::string clip = make_clip(dir);
  // The reference script's file: video_context (and audio_context, unused) [1, tokens, width];
  // 32 is the demo transformer's context width.
  const std::string emb = dir.file("emb.safetensors");
  io::write_safetensors(emb, {{"video_context", test::random_tensor({1, 7, 32}, 5)},
                              {"audio_context", test::random_tensor({1, 7, 16}, 6)}});
  const std::string out = dir.file("out");
  const test::CliResult r = generate(dir, {"--pipeline", "hdr-ic-lora", "--input", clip, "--text-embeddings", emb,
                                           "--num-frames", "9", "--skip-mp4", "--output-path", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("text contexts from " + emb + " ([1, 7, 32])"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("text encoder runs"), std::string::npos) << r.err;  // no text model loaded
  EXPECT_EQ(sorted_names(out + "/shot_exr"), frame_names(9));
  // As the reference's script is run: model files named, no text encoder among them.
  const std::string demo = dir.file(str("cache/ltx/", generate::kDemoBundleVersion, "/"));
  const std::string named = dir.file("named");
  const test::CliResult files =
      generate(dir, {"--pipeline", "hdr-ic-lora", "--input", clip, "--text-embeddings", emb, "--num-frames", "9",
                     "--distilled-checkpoint-path", demo + "ltx-2.3-demo.safetensors", "--spatial-upsampler-path",
                     demo + "spatial-upscaler-x2-demo.safetensors", "--hdr-lora",
                     demo + "hdr-ic-lora-demo.safetensors", "--output-path", named});
  ASSERT_EQ(files.code, 0) << files.err;
  EXPECT_EQ(sorted_names(named), (std::vector<std::string>{"shot.mp4", "shot_exr"}));
  // Contexts made for another model: refused before the generation, nothing written.
  const std::string wide = dir.file("wide.safetensors");
  io::write_safetensors(wide, {{"video_context", test::random_tensor({1, 7, 48}, 5)}});
  const test::CliResult bad = generate(dir, {"--pipeline", "hdr-ic-lora", "--input", clip, "--text-embeddings",
                                             wide, "--num-frames", "9", "--output-path", dir.file("out2")});
  EXPECT_EQ(bad.code, 1) << bad.err;
  EXPECT_NE(bad.err.find("--text-embeddings '" + wide + "': video_context is 48 wide but the transformer"),
            std::string::npos)
      << bad.err;
  EXPECT_FALSE(fs::exists(dir.file("out2")));
}

// The reference's --input folder: its .mp4 / .mov clips (any case, sorted), each into its own
// <clip>_exr/ and <clip>.mp4; other files are left alone.
TEST(HdrIcLoraCli, AFolderOfClipsGivesEachClipsOutputs) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  if (!media::openexr_available()) GTEST_SKIP() << "this build has no OpenEXR (LTX_OPENEXR=OFF)";
  TempDir dir;
  const std::string clips = dir.file("clips");
  fs::create_directories(clips);
  fs::copy_file(make_clip(dir), clips + "/b.MOV");
  EXPECT_TRUE(ffmpeg("testsrc=size=64x64:rate=24", "-frames:v 9 -c:v libx264 -pix_fmt yuv420p", clips + "/a.mp4"));
  test::write_bytes(clips + "/notes.txt", "not a clip");
  const std::string out = dir.file("out");
  const test::CliResult r = generate(dir, {"--pipeline", "hdr-ic-lora", "--input", clips, "--prompt", "a test pattern",
                                           "--num-frames", "9", "--output-path", out + "/"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("clip 2 of 2: " + clips + "/b.MOV"), std::string::npos) << r.err;
  EXPECT_EQ(sorted_names(out), (std::vector<std::string>{"a.mp4", "a_exr", "b.mp4", "b_exr"}));
  EXPECT_EQ(sorted_names(out + "/a_exr"), frame_names(9));
  EXPECT_EQ(sorted_names(out + "/b_exr"), frame_names(9));
  EXPECT_EQ(media::probe_media(out + "/a.mp4").streams.at(0).width, 64);
  EXPECT_EQ(media::probe_media(out + "/b.mp4").streams.at(0).width, 96);
}

TEST(HdrIcLoraCli, BadFlagsAndMediaFailWithOneLineAndNoOutput) {
  if (const std::string why = ffmpeg_tool_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string clip = make_clip(dir);
  const std::string corrupt = dir.file("corrupt.mp4");
  fs::copy_file(clip, corrupt);
  fs::resize_file(corrupt, fs::file_size(clip) / 3);
  // A LoRA without HDR metadata (an SDR IC-LoRA, say).
  const std::string sdr_lora = dir.file("sdr-lora.safetensors");
  io::write_safetensors(sdr_lora, {{"diffusion_model.x.lora_A.weight", Tensor::zeros({2, 4})}},
                        {{"reference_downscale_factor", "1"}});
  const std::string a_file = dir.file("a-file");
  const std::string no_context = dir.file("no-context.safetensors");
  io::write_safetensors(no_context, {{"audio_context", Tensor::zeros({1, 3, 16})}});
  std::fclose(std::fopen(a_file.c_str(), "w"));
  const std::string clips = dir.file("clips");
  fs::create_directories(clips);
  const std::string out = dir.file("out");
  struct Case {
    std::vector<std::string> args;
    std::string error;
    std::string output = "";  // the output path when not `out`
  };
  const auto hdr = [&](std::vector<std::string> a) {
    a.insert(a.begin(), {"--pipeline", "hdr-ic-lora"});
    return a;
  };
  const std::vector<Case> cases = {
      {hdr({}), "--pipeline hdr-ic-lora needs one SDR clip: pass --video-conditioning PATH [STRENGTH] once (got 0)"},
      {hdr({"--video-conditioning", clip, "--video-conditioning", clip}), "once (got 2)"},
      {hdr({"--video-conditioning", dir.file("missing.mp4")}), "--video-conditioning '" + dir.file("missing.mp4") +
                                                                    "': no such file"},
      {hdr({"--video-conditioning", corrupt}), "--video-conditioning '" + corrupt + "': cannot read the video"},
      {hdr({"--video-conditioning", clip, "2"}), "STRENGTH 2 must be in [0, 1]"},
      {hdr({"--video-conditioning", clip, "--hdr-lora", dir.file("none.safetensors")}),
       "--hdr-lora '" + dir.file("none.safetensors") + "': no such file"},
      {hdr({"--video-conditioning", clip, "--hdr-lora", sdr_lora}),
       "--hdr-lora '" + sdr_lora + "': the LoRA has no HDR metadata"},
      {hdr({"--video-conditioning", clip, "--checkpoint-path", dir.file("model.safetensors")}),
       "--pipeline hdr-ic-lora needs its HDR IC-LoRA: pass --hdr-lora PATH"},
      {hdr({"--video-conditioning", clip, "--height", "128"}),
       "--height: the hdr-ic-lora pipeline keeps the size and frame rate of --video-conditioning"},
      {hdr({"--video-conditioning", clip, "--spatial-tile", "100"}), "--spatial-tile 100 must be a multiple of 32"},
      {hdr({"--video-conditioning", clip, "--num-frames", "10"}), "--num-frames 10 must be 8k + 1"},
      {hdr({"--video-conditioning", clip, "--video-cfg-guidance-scale", "3"}),
       "the hdr-ic-lora pipeline runs the distilled schedules without guidance"},
      {hdr({"--video-conditioning", clip}), "--pipeline hdr-ic-lora writes EXR frames and an sRGB preview into a folder",
       dir.file("out.mp4")},
      {hdr({"--video-conditioning", clip, "--output-format", "exr"}),
       "ends in .mp4 but --output-format exr writes into a folder", dir.file("out.mp4")},
      {hdr({"--video-conditioning", clip}), "' is a file: the hdr-ic-lora pipeline writes into a folder", a_file},
      {hdr({"--input", clip, "--video-conditioning", clip}), "--input and --video-conditioning both name the clip"},
      {hdr({"--input", clips}), "--input '" + clips + "': the folder holds no .mp4 or .mov clip"},
      {{"--pipeline", "ic-lora", "--input", clip}, "--input is a flag of --pipeline hdr-ic-lora"},
      {hdr({"--video-conditioning", clip, "--text-embeddings", dir.file("none.safetensors")}),
       "--text-embeddings '" + dir.file("none.safetensors") + "': no such file"},
      {hdr({"--video-conditioning", clip, "--text-embeddings", no_context}),
       "--text-embeddings '" + no_context + "': it has no video_context tensor"},
      {hdr({"--video-conditioning", clip, "--text-embeddings", a_file}), "--text-embeddings '" + a_file + "': "},
      {hdr({"--video-conditioning", clip, "--text-embeddings", no_context, "--prompt", "a cat"}),
       "--prompt and --text-embeddings both give the text"},
      {{"--pipeline", "distilled", "--text-embeddings", no_context},
       "--text-embeddings is a flag of --pipeline hdr-ic-lora"},
      {{"--pipeline", "distilled", "--skip-mp4"}, "--skip-mp4 is a flag of --pipeline hdr-ic-lora"},
      {{"--pipeline", "ic-lora", "--video-conditioning", clip, "1", "--hdr-lora", sdr_lora},
       "--hdr-lora is a flag of --pipeline hdr-ic-lora"},
      {{"--pipeline", "distilled", "--output-format", "exr"},
       "--output-format exr (or a folder as --output-path) is the hdr-ic-lora pipeline's output"},
  };
  for (const Case& k : cases) {
    const std::string output = k.output.empty() ? out : k.output;
    std::vector<std::string> args = {"--output-path", output};
    // The text comes from --prompt, unless the case gives --text-embeddings.
    if (std::find(k.args.begin(), k.args.end(), "--text-embeddings") == k.args.end())
      args.insert(args.end(), {"--prompt", "a cat"});
    args.insert(args.end(), k.args.begin(), k.args.end());
    const test::CliResult r = generate(dir, args);
    EXPECT_EQ(r.code, 1) << k.error << "\n" << r.err;
    EXPECT_NE(r.err.find(k.error), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << k.error;
    EXPECT_FALSE(fs::exists(dir.file("out.mp4"))) << k.error;
  }
}

}  // namespace
}  // namespace ltx
