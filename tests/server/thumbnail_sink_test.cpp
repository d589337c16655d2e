#include "server/thumbnail_sink.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "generate/decode.h"
#include "io/io_test_util.h"
#include "media/image.h"
#include "media/support.h"
#include "media/yuv.h"

namespace ltx::server {
namespace {

using ltx::test::TempDir;

TEST(ThumbnailSink, PicksTheMiddleFrame) {
  EXPECT_EQ(thumbnail_frame_index(121), 60);
  EXPECT_EQ(thumbnail_frame_index(9), 4);
  EXPECT_EQ(thumbnail_frame_index(2), 0);
  EXPECT_EQ(thumbnail_frame_index(1), 0);
  EXPECT_EQ(thumbnail_frame_index(0), 0);  // unknown count: the first frame
}

// Frames [F, H, W, 3] with values spread over [-0.1, 1.1] (the clamp is exercised), each frame
// different from the others.
Tensor test_frames(int64_t f, int64_t h, int64_t w) {
  std::vector<float> v(static_cast<size_t>(f * h * w * 3));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = -0.1f + 1.2f * static_cast<float>((i * 37) % 101) / 100.f;
  return Tensor::from_vector(v, {f, h, w, 3});
}

// The frames reach the wrapped sink unchanged and the PNG holds the middle frame, converted as the
// reference converts frames to 8 bits, whichever chunk it arrives in.
TEST(ThumbnailSink, WritesTheMiddleFrameAsPngAndForwardsEverything) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O (LTX_IMAGE_IO)";
  TempDir tmp;
  const Tensor frames = test_frames(9, 6, 10);
  const std::string path = tmp.file("thumb.png");
  generate::MemorySink memory;
  ThumbnailSink sink(memory, path);
  generate::MediaFormat format;
  format.frames = 9;
  sink.begin(format);
  sink.write_frames(frames.narrow(0, 0, 3));
  sink.write_frames(frames.narrow(0, 3, 5));  // holds frame 4
  sink.write_frames(frames.narrow(0, 8, 1));
  EXPECT_FALSE(std::filesystem::exists(path));  // only once the video is whole
  sink.finish();

  ASSERT_EQ(memory.media().frames.shape(), frames.shape());
  EXPECT_EQ(std::memcmp(memory.media().frames.contiguous().data<float>(), frames.data<float>(),
                        static_cast<size_t>(frames.numel()) * sizeof(float)),
            0);
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  const Tensor png = media::read_image(path);
  const Tensor want = media::rgb_to_uint8(frames.select(0, 4));
  ASSERT_EQ(png.shape(), want.shape());
  EXPECT_EQ(std::memcmp(png.contiguous().data<uint8_t>(), want.data<uint8_t>(),
                        static_cast<size_t>(want.numel())),
            0);
  const Tensor other = media::rgb_to_uint8(frames.select(0, 3));
  EXPECT_NE(std::memcmp(png.contiguous().data<uint8_t>(), other.data<uint8_t>(),
                        static_cast<size_t>(want.numel())),
            0);
}

// A thumbnail that cannot be written leaves the video complete.
TEST(ThumbnailSink, AThumbnailThatCannotBeWrittenLeavesTheVideoComplete) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O (LTX_IMAGE_IO)";
  TempDir tmp;
  generate::MemorySink memory;
  ThumbnailSink sink(memory, tmp.file("no-such-folder/thumb.png"));
  generate::MediaFormat format;
  format.frames = 2;
  sink.begin(format);
  sink.write_frames(test_frames(2, 4, 4));
  EXPECT_NO_THROW(sink.finish());
  EXPECT_EQ(memory.media().frames.size(0), 2);
  EXPECT_FALSE(std::filesystem::exists(tmp.file("no-such-folder")));
}

}  // namespace
}  // namespace ltx::server
