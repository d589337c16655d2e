// The reference's float -> int16 audio conversion and the WAV writer.
#include "media/audio.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "media_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

uint32_t le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}
uint16_t le16(const std::string& b, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) |
                               (static_cast<uint8_t>(b[at + 1]) << 8));
}

TEST(Audio, Int16ConversionClipsScalesTruncatesAndInterleaves) {
  const Tensor w = test::random_tensor({2, 37}, 3, -1.3f, 1.3f);
  const auto got = media::waveform_to_int16(w);
  ASSERT_EQ(got.size(), 74u);
  const auto v = w.to_float_vector();
  for (int64_t n = 0; n < 37; ++n)
    for (int c = 0; c < 2; ++c) {
      const float x = std::clamp(v[c * 37 + n], -1.f, 1.f) * 32767.f;
      EXPECT_EQ(got[2 * n + c], static_cast<int16_t>(std::trunc(static_cast<double>(x))))
          << c << "," << n;
    }
  // Edges: full scale, truncation toward zero on both sides, NaN.
  const Tensor e = Tensor::from_vector(
      std::vector<float>{1.f, -1.f, 2.f, -2.f, 0.99999f, -0.00004f, NAN}, {1, 7});
  EXPECT_EQ(media::waveform_to_int16(e),
            (std::vector<int16_t>{32767, -32767, 32767, -32767, 32766, -1, 0}));
  // [1, C, N] (the decoder's batch of one) and strided inputs give the same samples.
  EXPECT_EQ(media::waveform_to_int16(w.unsqueeze(0)), got);
  EXPECT_EQ(media::waveform_to_int16(test::non_contiguous_copy(w)), got);
}

TEST(Audio, RejectsBadLayouts) {
  test::expect_error_containing(
      [] {
        media::waveform_to_int16(Tensor::zeros({3, 10}));
      },
      {"mono or stereo"});
  test::expect_error_containing(
      [] {
        media::waveform_to_int16(Tensor::zeros({2, 0}));
      },
      {"no samples"});
  test::expect_error_containing(
      [] {
        media::waveform_to_int16(Tensor::zeros({2, 2, 10}));
      },
      {"[channels, samples]"});
  test::expect_error_containing(
      [] {
        media::waveform_to_int16(Tensor::zeros({2, 10}, DType::I32));
      },
      {"floating"});
}

TEST(Audio, WavBytesAreCanonicalPcm16) {
  test::TempDir dir;
  const std::string path = dir.file("sub/a.wav");  // parent folders are created
  const Tensor w =
      Tensor::from_vector(std::vector<float>{0.5f, -0.5f, 1.f, 0.f, -1.f, 0.25f}, {2, 3});
  media::write_wav(path, w, 24000);
  const std::string b = test::read_bytes(path);
  ASSERT_EQ(b.size(), 44u + 12u);
  EXPECT_EQ(b.substr(0, 4), "RIFF");
  EXPECT_EQ(le32(b, 4), 36u + 12u);
  EXPECT_EQ(b.substr(8, 8), "WAVEfmt ");
  EXPECT_EQ(le32(b, 16), 16u);
  EXPECT_EQ(le16(b, 20), 1);  // PCM
  EXPECT_EQ(le16(b, 22), 2);  // channels
  EXPECT_EQ(le32(b, 24), 24000u);
  EXPECT_EQ(le32(b, 28), 24000u * 4u);
  EXPECT_EQ(le16(b, 32), 4);   // block align
  EXPECT_EQ(le16(b, 34), 16);  // bits
  EXPECT_EQ(b.substr(36, 4), "data");
  EXPECT_EQ(le32(b, 40), 12u);
  // Interleaved L R: (0.5, 0), (-0.5, -1), (1, 0.25).
  const std::vector<int16_t> expect = {16383, 0, -16383, -32767, 32767, 8191};
  for (size_t i = 0; i < expect.size(); ++i)
    EXPECT_EQ(static_cast<int16_t>(le16(b, 44 + 2 * i)), expect[i]) << i;
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  media::write_wav(path, w.narrow(0, 0, 1), 16000);  // mono replaces the file
  const std::string m = test::read_bytes(path);
  EXPECT_EQ(le16(m, 22), 1);
  EXPECT_EQ(le32(m, 40), 6u);
}

TEST(Audio, WavToUnwritablePathFailsAndLeavesNothing) {
  test::TempDir dir;
  test::write_bytes(dir.file("file"), "x");
  const std::string path = dir.file("file/a.wav");  // parent is a file
  test::expect_error_containing(
      [&] {
        media::write_wav(path, Tensor::zeros({2, 4}), 48000);
      },
      {"write_wav", path});
  EXPECT_EQ(test::list_dir(dir.file("")), (std::vector<std::string>{"file"}));
  test::expect_error_containing(
      [&] {
        media::write_wav(dir.file("b.wav"), Tensor::zeros({2, 4}), 0);
      },
      {"sample rate"});
}

}  // namespace
}  // namespace ltx
