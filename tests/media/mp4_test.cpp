// MP4 writing: a synthetic clip with audio written, probed with libavformat and decoded back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "media/video_reader.h"
#include "media/video_writer.h"
#include "media_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

constexpr int64_t kH = 48, kW = 64, kF = 13;
constexpr double kPi = 3.14159265358979323846;

// Four flat quadrants; the bottom-right one is a gray that brightens frame by frame, so the
// decoded order and count show.
const float kColours[3][3] = {{0.8f, 0.2f, 0.1f}, {0.1f, 0.7f, 0.3f}, {0.2f, 0.3f, 0.9f}};
float ramp(int64_t f) { return 0.15f + 0.7f * static_cast<float>(f) / (kF - 1); }

Tensor clip() {
  Tensor t = Tensor::empty({kF, kH, kW, 3});
  float* p = t.data<float>();
  for (int64_t f = 0; f < kF; ++f)
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t w = 0; w < kW; ++w) {
        const int q = (h >= kH / 2) * 2 + (w >= kW / 2);
        for (int c = 0; c < 3; ++c)
          p[((f * kH + h) * kW + w) * 3 + c] = q < 3 ? kColours[q][c] : ramp(f);
      }
  return t;
}

// Mean of channel c over the interior of quadrant q of decoded frame f (u8 [F, H, W, 3]).
double quadrant_mean(const Tensor& frames, int64_t f, int q, int c) {
  const int64_t h0 = (q / 2) * kH / 2 + 6, w0 = (q % 2) * kW / 2 + 6;
  double s = 0;
  int64_t n = 0;
  const uint8_t* p = frames.data<uint8_t>();
  for (int64_t h = h0; h < h0 + kH / 2 - 12; ++h)
    for (int64_t w = w0; w < w0 + kW / 2 - 12; ++w, ++n) s += p[((f * kH + h) * kW + w) * 3 + c];
  return s / static_cast<double>(n);
}

Tensor stereo_tone(int64_t n, int rate) {
  Tensor t = Tensor::empty({2, n});
  for (int64_t i = 0; i < n; ++i) {
    const double s = static_cast<double>(i) / rate;
    t.data<float>()[i] = static_cast<float>(0.5 * std::sin(2 * kPi * 440 * s));
    t.data<float>()[n + i] = static_cast<float>(0.3 * std::sin(2 * kPi * 660 * s));
  }
  return t;
}

// Normalised correlation of a[off:] with b over `len` samples.
double correlation(const float* a, const float* b, int64_t len) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < len; ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb + 1e-30);
}

TEST(Mp4, RoundTripWithAudio) {
  LTX_REQUIRE_FFMPEG();
  test::TempDir dir;
  const std::string path = dir.file("out/clip.mp4");
  const int rate = 48000;
  const int64_t n = rate * kF / 24;  // as long as the video
  const Tensor frames = clip();
  const media::AudioTrack audio{stereo_tone(n, rate), rate};
  media::write_mp4(path, frames, 24.0, &audio);
  EXPECT_EQ(test::list_dir(dir.file("out")), (std::vector<std::string>{"clip.mp4"}));

  const media::MediaInfo info = media::probe_media(path);
  EXPECT_NE(info.format.find("mp4"), std::string::npos) << info.format;
  ASSERT_EQ(info.streams.size(), 2u);
  const media::StreamInfo& v = info.streams[0];
  const media::StreamInfo& a = info.streams[1];
  EXPECT_EQ(v.type, "video");
  EXPECT_EQ(v.codec, "h264");
  EXPECT_EQ(v.width, kW);
  EXPECT_EQ(v.height, kH);
  EXPECT_EQ(v.pixel_format, "yuv420p");
  EXPECT_EQ(v.color_space, "bt709");
  EXPECT_EQ(v.color_range, "tv");
  EXPECT_DOUBLE_EQ(v.fps, 24.0);
  EXPECT_EQ(v.frames, kF);
  EXPECT_NEAR(v.duration, kF / 24.0, 1e-6);
  EXPECT_EQ(a.type, "audio");
  EXPECT_EQ(a.codec, "aac");
  EXPECT_EQ(a.sample_rate, rate);
  EXPECT_EQ(a.channels, 2);
  EXPECT_NEAR(a.duration, static_cast<double>(n) / rate, 1.0 / 24);
  EXPECT_NEAR(info.duration, kF / 24.0, 1.0 / 24);

  // Pixels: every frame back, in order, within H.264 tolerance of the source colours.
  const Tensor dec = media::decode_video_frames(path);
  ASSERT_EQ(dec.shape(), (Shape{kF, kH, kW, 3}));
  for (int64_t f = 0; f < kF; ++f)
    for (int q = 0; q < 4; ++q)
      for (int c = 0; c < 3; ++c) {
        const double expect = 255.0 * (q < 3 ? kColours[q][c] : ramp(f));
        EXPECT_NEAR(quadrant_mean(dec, f, q, c), expect, 5.0)
            << "frame " << f << " quadrant " << q << " channel " << c;
      }
  EXPECT_EQ(media::decode_video_frames(path, 2).size(0), 2);

  // Audio: the AAC priming is trimmed (edit list), so the tone lines up with the source.
  const media::AudioTrack back = media::decode_audio(path);
  ASSERT_EQ(back.waveform.size(0), 2);
  EXPECT_EQ(back.sample_rate, rate);
  EXPECT_NEAR(static_cast<double>(back.waveform.size(1)), static_cast<double>(n), 1024);
  const int64_t len = std::min(back.waveform.size(1), n) - 4096;
  for (int c = 0; c < 2; ++c) {
    const float* src = audio.waveform.data<float>() + c * n + 2048;
    const float* got = back.waveform.data<float>() + c * back.waveform.size(1) + 2048;
    EXPECT_GT(correlation(src, got, len), 0.99) << "channel " << c;
  }
}

// The top-level MP4 boxes of a file, in order ("ftyp", "moov", "mdat", ...).
std::vector<std::string> top_level_boxes(const std::string& path) {
  const std::string bytes = test::read_bytes(path);
  std::vector<std::string> boxes;
  for (size_t at = 0; at + 8 <= bytes.size();) {
    const auto b = [&](size_t i) {
      return static_cast<uint64_t>(static_cast<uint8_t>(bytes[at + i]));
    };
    uint64_t size = b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
    boxes.push_back(bytes.substr(at + 4, 4));
    if (size == 1 && at + 16 <= bytes.size()) {  // a 64-bit size follows the type
      size = 0;
      for (size_t i = 8; i < 16; ++i) size = size << 8 | b(i);
    }
    if (size < 8) break;
    at += size;
  }
  return boxes;
}

TEST(Mp4, FaststartPutsTheIndexBeforeTheMedia) {
  LTX_REQUIRE_FFMPEG();
  test::TempDir dir;
  const int rate = 48000;
  const Tensor audio = stereo_tone(rate * kF / 24, rate);
  for (const bool faststart : {false, true}) {
    const std::string path = dir.file(faststart ? "fast.mp4" : "plain.mp4");
    media::Mp4Options opt;
    opt.audio_sample_rate = rate;
    opt.faststart = faststart;
    media::Mp4Writer w(path, 24.0, opt);
    w.write_frames(clip());
    w.write_audio(audio);
    w.finish();
    const std::vector<std::string> boxes = top_level_boxes(path);
    const auto pos = [&](const char* type) {
      return std::find(boxes.begin(), boxes.end(), type) - boxes.begin();
    };
    ASSERT_LT(pos("moov"), static_cast<long>(boxes.size())) << path;
    ASSERT_LT(pos("mdat"), static_cast<long>(boxes.size())) << path;
    EXPECT_EQ(pos("moov") < pos("mdat"), faststart) << path;
    // The same media either way.
    EXPECT_EQ(media::probe_media(path).streams.size(), 2u);
    EXPECT_EQ(media::decode_video_frames(path).size(0), kF);
  }
  EXPECT_EQ(test::list_dir(dir.file("")), (std::vector<std::string>{"fast.mp4", "plain.mp4"}));
}

TEST(Mp4, StreamingChunksFpsTruncationAndMonoAudio) {
  LTX_REQUIRE_FFMPEG();
  test::TempDir dir;
  const std::string path = dir.file("chunks.mp4");
  media::Mp4Options opt;
  opt.audio_sample_rate = 16000;
  opt.audio_channels = 1;
  const Tensor frames = clip().to(DType::BF16);  // the decoder's dtype
  {
    media::Mp4Writer w(path, 24.9, opt);  // written as int(24.9) = 24 fps, as the reference
    w.write_audio(stereo_tone(8000, 16000).narrow(0, 0, 1).unsqueeze(0));  // [1, 1, N]
    w.write_frames(frames.narrow(0, 0, 5));
    w.write_frames(frames.narrow(0, 5, 7));
    w.write_frames(frames.select(0, 12));
    EXPECT_FALSE(std::filesystem::exists(path));
    EXPECT_TRUE(std::filesystem::exists(path + ".tmp"));
    w.finish();
    EXPECT_EQ(w.frames_written(), kF);
  }
  const media::MediaInfo info = media::probe_media(path);
  ASSERT_EQ(info.streams.size(), 2u);
  EXPECT_DOUBLE_EQ(info.streams[0].fps, 24.0);
  EXPECT_EQ(info.streams[0].frames, kF);
  EXPECT_EQ(info.streams[1].channels, 1);
  EXPECT_EQ(info.streams[1].sample_rate, 16000);
  EXPECT_NEAR(info.streams[1].duration, 0.5, 1.0 / 24);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  // Video only.
  media::write_mp4(dir.file("silent.mp4"), frames.narrow(0, 0, 2), 30.0);
  const media::MediaInfo s = media::probe_media(dir.file("silent.mp4"));
  ASSERT_EQ(s.streams.size(), 1u);
  EXPECT_DOUBLE_EQ(s.streams[0].fps, 30.0);
  EXPECT_NEAR(s.duration, 2 / 30.0, 1e-3);  // the movie header counts milliseconds
  EXPECT_NEAR(s.streams[0].duration, 2 / 30.0, 1e-6);
}

TEST(Mp4, ErrorsLeaveNoFile) {
  LTX_REQUIRE_FFMPEG();
  test::TempDir dir;
  const Tensor frames = clip().narrow(0, 0, 2);
  // Unwritable path: the parent is a file.
  test::write_bytes(dir.file("file"), "x");
  const std::string bad = dir.file("file/clip.mp4");
  test::expect_error_containing([&] { media::write_mp4(bad, frames, 24); },
                                {"write_mp4", bad, "cannot create the folder"});
  // Bad arguments, some found before anything is written, some midway.
  const std::string path = dir.file("clip.mp4");
  test::expect_error_containing([&] { media::write_mp4(path, frames, 0.5); }, {"frame rate"});
  test::expect_error_containing([&] { media::write_mp4(path, frames.narrow(1, 0, 45), 24); },
                                {"even", "45x64"});
  test::expect_error_containing(
      [&] {
        media::Mp4Writer w(path, 24);
        w.write_frames(frames);
        w.write_frames(clip().narrow(1, 0, 24).narrow(0, 0, 1));
      },
      {"a chunk of 24x64 frames after frames of 48x64"});
  test::expect_error_containing([&] { media::Mp4Writer(path, 24).finish(); }, {"no frames"});
  test::expect_error_containing(
      [&] {
        media::Mp4Options opt;
        opt.audio_sample_rate = 48000;
        media::Mp4Writer w(path, 24, opt);
        w.write_frames(frames);
        w.finish();
      },
      {"write_audio was never called"});
  test::expect_error_containing(
      [&] {
        media::Mp4Options opt;
        opt.audio_sample_rate = 48000;
        media::Mp4Writer w(path, 24, opt);
        w.write_audio(Tensor::zeros({1, 100}));
      },
      {"1 channel(s)", "made for 2"});
  test::expect_error_containing(
      [&] {
        media::Mp4Options opt;
        opt.preset = "no-such-preset";
        media::write_mp4(path, frames, 24, nullptr, opt);
      },
      {"libx264", "no-such-preset"});
  {
    media::Mp4Writer abandoned(path, 24);
    abandoned.write_frames(frames);
  }
  EXPECT_EQ(test::list_dir(dir.file("")), (std::vector<std::string>{"file"}));
}

TEST(Mp4, WithoutFfmpegSaysHowToRebuild) {
  if (media::ffmpeg_available()) GTEST_SKIP() << "built with FFmpeg";
  test::TempDir dir;
  test::expect_error_containing(
      [&] { media::write_mp4(dir.file("a.mp4"), clip().narrow(0, 0, 1), 24); },
      {"this build has no FFmpeg support: rebuild with", "-DLTX_FFMPEG=ON", "libavcodec-dev"});
  test::expect_error_containing([&] { media::probe_media(dir.file("a.mp4")); },
                                {"no FFmpeg support"});
  EXPECT_TRUE(test::list_dir(dir.file("")).empty());
}

}  // namespace
}  // namespace ltx
