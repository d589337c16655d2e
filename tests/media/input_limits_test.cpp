// Limits on input sizes (core/input_limits.h): small crafted files that claim a huge size are
// refused before anything of that size is allocated, with an error naming the limit.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/input_limits.h"
#include "io/io_test_util.h"
#include "media/exr.h"
#include "media/image.h"
#include "media/support.h"
#include "media/video_reader.h"
#include "models/text/tokenizer.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::TempDir;

// A sparse file of `size` bytes starting with `head` (no disk space is used for the rest).
std::string sparse_file(const std::string& path, const std::string& head, int64_t size) {
  test::write_bytes(path, head);
  std::filesystem::resize_file(path, static_cast<uintmax_t>(size));
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

uint32_t crc32(const std::string& bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (const char ch : bytes) {
    c ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put_be32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_le(std::string& s, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// A PNG whose IHDR declares width x height (8-bit RGB) and which holds no pixel data.
std::string png_claiming(uint32_t width, uint32_t height) {
  std::string s("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr = "IHDR";
  put_be32(ihdr, width);
  put_be32(ihdr, height);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);
  put_be32(s, 13);
  s += ihdr;
  put_be32(s, crc32(ihdr));
  put_be32(s, 0);
  s += "IEND";
  put_be32(s, crc32("IEND"));
  return s;
}

TEST(InputLimits, ATextFilePastItsLimitIsNotRead) {
  TempDir dir;
  const std::string path =
      sparse_file(dir.file("config.json"), "{\"a\": 1}", limits::kMaxTextFileBytes + 1);
  const std::string err = error_of([&] { limits::read_file_within(path, limits::kMaxTextFileBytes, "config file"); });
  EXPECT_NE(err.find("config file '" + path + "' has 16777217 bytes, more than the limit of 16 MiB"),
            std::string::npos)
      << err;
  test::write_bytes(path, "{\"a\": 1}");
  EXPECT_EQ(limits::read_file_within(path, limits::kMaxTextFileBytes, "config file"), "{\"a\": 1}");
}

TEST(InputLimits, ATokenizerJsonPastItsLimitIsNotRead) {
  TempDir dir;
  const std::string path = sparse_file(dir.file("tokenizer.json"), "{", limits::kMaxTokenizerJsonBytes + 1);
  const std::string err = error_of([&] { (void)text::Tokenizer::from_file(path); });
  EXPECT_NE(err.find("more than the limit of 256 MiB for a tokenizer.json"), std::string::npos) << err;
}

TEST(InputLimits, AnImageHeaderDeclaringTooManyPixelsIsRefusedBeforeDecoding) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const std::string png = png_claiming(20000, 20000);
  std::string err = error_of([&] {
    (void)media::decode_image(reinterpret_cast<const uint8_t*>(png.data()), png.size(), "huge.png");
  });
  EXPECT_NE(err.find("read_image 'huge.png': the PNG header declares 20000x20000 pixels, more than the limit "
                     "of 268435456 pixels"),
            std::string::npos)
      << err;
  // A JPEG whose SOF0 declares 65535 x 65535.
  const std::string jpeg("\xFF\xD8\xFF\xC0\x00\x11\x08\xFF\xFF\xFF\xFF\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01"
                         "\xFF\xD9",
                         23);
  err = error_of([&] {
    (void)media::decode_image(reinterpret_cast<const uint8_t*>(jpeg.data()), jpeg.size(), "huge.jpg");
  });
  EXPECT_NE(err.find("the JPEG header declares 65535x65535 pixels, more than the limit"), std::string::npos)
      << err;
}

TEST(InputLimits, AnImageFilePastItsLimitIsNotRead) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  TempDir dir;
  const std::string path = sparse_file(dir.file("big.png"), png_claiming(64, 64), limits::kMaxImageFileBytes + 1);
  const std::string err = error_of([&] { (void)media::read_image(path); });
  EXPECT_NE(err.find("more than the limit of 512 MiB for an image file"), std::string::npos) << err;
}

// A 4 x 4 EXR whose header is edited to declare a 20000 x 20000 data window: refused while the
// header is read, before OpenEXR allocates its line table or ltx the frame.
TEST(InputLimits, AnExrHeaderDeclaringTooLargeAWindowIsRefused) {
  if (!media::openexr_available()) GTEST_SKIP() << "built without OpenEXR";
  TempDir dir;
  const std::string path = dir.file("huge.exr");
  media::write_exr(path, Tensor::zeros({4, 4, 3}));
  std::string bytes = test::read_bytes(path);
  const std::string key("dataWindow\0box2i\0", 17);
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  std::string window;
  for (const uint32_t v : {0u, 0u, 19999u, 19999u}) put_le(window, v, 4);
  bytes.replace(at + key.size() + 4, 16, window);
  test::write_bytes(path, bytes);
  const std::string err = error_of([&] { (void)media::read_exr(path); });
  EXPECT_NE(err.find("EXR '" + path + "': "), std::string::npos) << err;
  EXPECT_NE(err.find("16384"), std::string::npos) << err;
}

// A 30 KB WAV at 1 Hz whose 15000 samples last over four hours: the decode stops at the limit.
TEST(InputLimits, AudioLongerThanTheLimitIsNotDecoded) {
  if (!media::ffmpeg_available()) GTEST_SKIP() << "built without FFmpeg";
  TempDir dir;
  const uint32_t samples = 15000, data = samples * 2;
  std::string wav = "RIFF";
  put_le(wav, 36 + data, 4);
  wav += "WAVEfmt ";
  put_le(wav, 16, 4);
  put_le(wav, 1, 2);  // PCM
  put_le(wav, 1, 2);  // mono
  put_le(wav, 1, 4);  // 1 Hz
  put_le(wav, 2, 4);  // bytes a second
  put_le(wav, 2, 2);  // block align
  put_le(wav, 16, 2);
  wav += "data";
  put_le(wav, data, 4);
  wav += std::string(data, '\0');
  const std::string path = dir.file("long.wav");
  test::write_bytes(path, wav);
  const std::string err = error_of([&] { (void)media::decode_audio(path); });
  EXPECT_NE(err.find("the audio runs past the limit of 14400 s"), std::string::npos) << err;
}

}  // namespace
}  // namespace ltx
