// Writing to a full disk (simulated with RLIMIT_FSIZE: support/file_size_limit.h): every writer
// fails with one error naming the file and the cause, and leaves neither the output nor its
// temporary behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "io/io_test_util.h"
#include "media/audio.h"
#include "media/exr.h"
#include "media/image.h"
#include "media/support.h"
#include "media/video_writer.h"
#include "media/yuv.h"
#include "support/file_size_limit.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

constexpr rlim_t kLimit = 4096;  // bytes: every output below is larger

// Runs `write` under the limit; expects an ltx::Error naming `path` (or its temporary) and "File
// too large" (EFBIG, what the limit turns a write past it into), and nothing left in the folder.
void expect_clean_failure(const std::string& path, const std::function<void()>& write) {
  std::string err;
  {
    const test::FileSizeLimit limit(kLimit);
    try {
      write();
    } catch (const Error& e) {
      err = e.what();
    }
  }
  ASSERT_FALSE(err.empty()) << path << ": the write succeeded under a " << kLimit << "-byte limit";
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("File too large"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(path)) << path;
  EXPECT_FALSE(fs::exists(path + ".tmp")) << path << ".tmp";
  EXPECT_TRUE(fs::is_empty(fs::path(path).parent_path())) << "left in " << fs::path(path).parent_path();
}

Tensor noise_frames(int64_t frames, int64_t h, int64_t w) {
  return test::random_tensor({frames, h, w, 3}, 7, 0.f, 1.f);
}

TEST(FullDisk, WavWriteFailsCleanly) {
  TempDir dir;
  const std::string path = dir.file("out/a.wav");
  fs::create_directories(dir.file("out"));
  expect_clean_failure(path, [&] { media::write_wav(path, test::random_tensor({2, 16000}, 1), 16000); });
}

TEST(FullDisk, PngWritesFailCleanly) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  TempDir dir;
  fs::create_directories(dir.file("out"));
  const Tensor frames = noise_frames(3, 64, 64);
  const std::string png = dir.file("out/a.png");
  expect_clean_failure(png, [&] { media::write_png(png, media::rgb_to_uint8(frames.select(0, 0))); });
  const std::string folder = dir.file("out/frames");
  expect_clean_failure(folder, [&] {
    media::PngFrameWriter w(folder);
    w.write_frames(frames);
    w.finish();
  });
}

TEST(FullDisk, ExrWritesFailCleanly) {
  if (!media::openexr_available()) GTEST_SKIP() << "built without OpenEXR";
  TempDir dir;
  fs::create_directories(dir.file("out"));
  const Tensor frames = noise_frames(2, 64, 64);
  const std::string exr = dir.file("out/a.exr");
  expect_clean_failure(exr, [&] { media::write_exr(exr, frames.select(0, 0)); });
  const std::string folder = dir.file("out/frames");
  expect_clean_failure(folder, [&] {
    media::ExrFrameWriter w(folder);
    w.write_frames(frames);
    w.finish();
  });
}

TEST(FullDisk, Mp4WriteFailsCleanly) {
  if (!media::ffmpeg_available()) GTEST_SKIP() << "built without FFmpeg";
  TempDir dir;
  fs::create_directories(dir.file("out"));
  const std::string path = dir.file("out/a.mp4");
  const media::AudioTrack audio{test::random_tensor({2, 48000}, 3, -0.5f, 0.5f), 48000};
  expect_clean_failure(path, [&] { media::write_mp4(path, noise_frames(9, 64, 64), 24.0, &audio); });
}

}  // namespace
}  // namespace ltx
