// The hdr-ic-lora outputs' pieces without models: the sRGB preview pixels (the reference's
// encode_exr_sequence_to_mp4 arithmetic) and LinearHdrSink's crop / high-quality subsampling
// across decode chunks.
#include "generate/hdr_output.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <vector>

#include "media/exr.h"
#include "media/support.h"
#include "media/video_reader.h"
#include "io/io_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace hdr = pipelines::hdr_ic_lora;

TEST(HdrOutput, PreviewPixelsAreTheClampedSrgbCurveOfTheHalfFloatValues) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> linear = {-1.0f, 0.0f, 0.002f, 0.0031308f, 0.18f, 0.5f, 0.9f, 1.0f, 5.0f, nan, 0.0f, 0.0f};
  // x * 255 + 0.5 truncated of the sRGB OETF of the half-float value, clamped to [0, 1]
  // (worked out by hand from IEC 61966-2-1; NaN shows as black).
  const std::vector<int> want = {0, 0, 7, 10, 118, 188, 243, 255, 255, 0, 0, 0};
  const Tensor out = generate::srgb_preview_frames(Tensor::from_vector(linear, Shape{1, 2, 2, 3}));
  ASSERT_EQ(out.shape(), (Shape{1, 2, 2, 3}));
  const std::vector<float> got = out.to_float_vector();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i] * 255.0f, static_cast<float>(want[i])) << i;
}

TEST(HdrOutput, LinearSinkCropsAndKeepsTheClipsEvenFramesAcrossChunks) {
  const hdr::HdrResolution size = hdr::align_resolution(60, 100);  // generated at 64 x 128
  const Tensor decoded = test::random_tensor({9, 64, 128, 3}, 7, 0.0f, 1.0f);
  for (const bool high_quality : {false, true}) {
    generate::MemorySink memory;
    generate::LinearHdrSink sink(memory, size, high_quality, media::HdrTransfer::LogC3);
    generate::MediaFormat format;
    format.fps = 24.0;
    format.frames = 9;
    format.audio_sample_rate = 48000;
    format.audio_channels = 2;
    sink.begin(format);
    // Chunks of 3, 2 and 4 frames: the second starts on an odd clip frame.
    sink.write_frames(decoded.narrow(0, 0, 3));
    sink.write_frames(decoded.narrow(0, 3, 2));
    sink.write_frames(decoded.narrow(0, 5, 4));
    sink.write_audio(Tensor::zeros({2, 10}));
    sink.finish();
    const generate::DecodedMedia& m = memory.media();
    EXPECT_EQ(m.format.frames, high_quality ? 5 : 9);
    EXPECT_EQ(m.format.audio_sample_rate, 0);  // video only
    EXPECT_FALSE(m.waveform.defined());
    EXPECT_EQ(sink.frames_out(), high_quality ? 5 : 9);
    // The same frames as linear_frames of the whole decode at once.
    const Tensor want = hdr::linear_frames(decoded, size, high_quality, media::HdrTransfer::LogC3);
    ASSERT_EQ(m.frames.shape(), want.shape()) << high_quality;
    EXPECT_EQ(m.frames.shape(), (Shape{high_quality ? 5 : 9, 60, 100, 3}));
    EXPECT_EQ(m.frames.to_float_vector(), want.to_float_vector()) << high_quality;
  }
}

TEST(HdrOutput, PathsFollowTheReferencesLayout) {
  const generate::HdrOutputPaths p = generate::hdr_output_paths("runs/out/", "clips/street.night.mp4");
  EXPECT_EQ(p.dir, "runs/out");
  EXPECT_EQ(p.exr_dir, "runs/out/street.night_exr");
  EXPECT_EQ(p.preview_mp4, "runs/out/street.night.mp4");
  EXPECT_EQ(generate::hdr_output_paths("out", "a.mov").exr_dir, "out/a_exr");
}

TEST(HdrOutput, ExrSinkLeavesNothingUnlessItFinishes) {
  if (!media::openexr_available() || !media::ffmpeg_available())
    GTEST_SKIP() << "this build lacks OpenEXR or FFmpeg";
  test::TempDir dir;
  const Tensor frames = test::random_tensor({3, 32, 48, 3}, 3, 0.0f, 4.0f);
  generate::MediaFormat format;
  format.fps = 24.0;
  format.frames = 3;
  const generate::HdrOutputPaths paths = generate::hdr_output_paths(dir.file("new/out"), "clip.mp4");
  {
    generate::ExrOutputSink sink(paths, /*skip_mp4=*/false);
    sink.begin(format);
    sink.write_frames(frames.narrow(0, 0, 2));
  }  // abandoned mid-way (an error, a cancellation): no frame folder, no preview, no new folder
  EXPECT_FALSE(std::filesystem::exists(dir.file("new")));
  {
    generate::ExrOutputSink sink(paths, /*skip_mp4=*/false);
    sink.begin(format);
    sink.write_frames(frames.narrow(0, 0, 2));
    sink.write_frames(frames.narrow(0, 2, 1));
    sink.finish();
  }
  EXPECT_TRUE(std::filesystem::is_regular_file(paths.preview_mp4));
  int64_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(paths.exr_dir)) ++n;
  EXPECT_EQ(n, 3);
  // Nothing else next to them (no temporaries).
  n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(paths.dir)) ++n;
  EXPECT_EQ(n, 2);
}

TEST(HdrMaster, PathsPutTheExrFolderBesideTheMaster) {
  const generate::HdrMasterPaths p = generate::hdr_master_paths("runs/shot.v2.mp4");
  EXPECT_EQ(p.mp4, "runs/shot.v2.mp4");
  EXPECT_EQ(p.exr_dir, "runs/shot.v2_exr");
  EXPECT_EQ(generate::hdr_master_paths("out.mp4").exr_dir, "out_exr");
  test::TempDir dir;
  std::filesystem::create_directories(dir.file("out_exr"));
  test::write_bytes(dir.file("out_exr/frame_00000.exr"), "x");
  test::expect_error_containing(
      [&] { generate::check_hdr_master_output(generate::hdr_master_paths(dir.file("out.mp4")), "--output-path"); },
      {"--output-path", "out_exr", "exists and is not an empty folder"});
}

// The reference's _encode_hdr_video_outputs from decoded ACEScct codes: the HLG master (with its
// audio) at the path, the EXR frames in the colour space's values and tags beside it, both only
// on finish().
TEST(HdrMaster, WritesTheHlgMasterAndTheExrFramesTogether) {
  if (!media::openexr_available() || !media::ffmpeg_available())
    GTEST_SKIP() << "this build lacks OpenEXR or FFmpeg";
  test::TempDir dir;
  // 96x64: Debian's libx265 3.5 writes out of bounds in its lookahead (cuTree) for frames as
  // small as 48x32 (valgrind), which would corrupt the test's heap.
  const Tensor codes = test::random_tensor({3, 64, 96, 3}, 5, 0.0f, 1.0f);
  generate::MediaFormat format;
  format.fps = 24.0;
  format.frames = 3;
  format.audio_sample_rate = 48000;
  format.audio_channels = 2;
  for (const auto cs : {media::HdrColorSpace::SrgbLinear, media::HdrColorSpace::ACEScg, media::HdrColorSpace::ACEScct}) {
    const std::string name = media::hdr_color_space_name(cs);
    const generate::HdrMasterPaths paths = generate::hdr_master_paths(dir.file(name + "/out.mp4"));
    {
      generate::HdrMasterSink sink(paths, cs);
      sink.begin(format);
      sink.write_frames(codes.narrow(0, 0, 2));
    }  // abandoned: neither file
    EXPECT_FALSE(std::filesystem::exists(paths.mp4)) << name;
    EXPECT_FALSE(std::filesystem::exists(paths.exr_dir)) << name;
    generate::HdrMasterSink sink(paths, cs);
    sink.begin(format);
    sink.write_frames(codes.narrow(0, 0, 2));
    sink.write_frames(codes.narrow(0, 2, 1));
    sink.write_audio(test::random_tensor({2, 4800}, 9, -0.5f, 0.5f));
    sink.finish();

    const media::MediaInfo info = media::probe_media(paths.mp4);
    ASSERT_EQ(info.streams.size(), 2u) << name;
    const media::StreamInfo& v = info.streams[0].type == "video" ? info.streams[0] : info.streams[1];
    EXPECT_EQ(v.codec, "hevc") << name;
    EXPECT_EQ(v.pixel_format, "yuv420p10le") << name;
    EXPECT_EQ(v.color_primaries, "bt2020") << name;
    EXPECT_EQ(v.color_transfer, "arib-std-b67") << name;
    EXPECT_EQ(v.frames, 3) << name;

    const std::vector<std::string> frames = media::exr_frame_paths(paths.exr_dir);
    ASSERT_EQ(frames.size(), 3u) << name;
    const Tensor want = media::hdr_exr_frames(codes, cs);
    for (int64_t f = 0; f < 3; ++f) {
      const std::vector<float> got = media::read_exr(frames[static_cast<size_t>(f)]).to_float_vector();
      const std::vector<float> w = want.select(0, f).contiguous().to_float_vector();
      ASSERT_EQ(got.size(), w.size());
      for (size_t i = 0; i < got.size(); ++i)  // half float: 11 significant bits
        ASSERT_NEAR(got[i], w[i], 1e-3 * std::max(1.0f, std::abs(w[i]))) << name << " frame " << f << " " << i;
    }
  }
}

}  // namespace
}  // namespace ltx
