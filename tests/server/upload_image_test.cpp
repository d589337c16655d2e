// Uploaded images: the header probe (PNG IHDR, JPEG SOFn, an EXR's data window) that sizes an
// image without decoding it, data URLs, and the order of the checks (bytes, header, decode).
#include "server/upload_image.h"

#include <gtest/gtest.h>

#include <string>

#include "media/support.h"
#include "server/api_error.h"
#include "server/media_test_util.h"
#include "server/upload_test_util.h"

namespace ltx::server {
namespace {

constexpr int64_t kMiB = 1 << 20;

// The ApiError `fn` throws (a failed test when it throws none).
template <typename Fn>
ApiError error_of(Fn fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return ApiError(0, "", "");
}

TEST(UploadImage, ProbesRealFiles) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const auto p = probe_image_header(test::png(40, 24));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->format, "png");
  EXPECT_EQ(p->width, 40);
  EXPECT_EQ(p->height, 24);
  const auto j = probe_image_header(test::jpeg(40, 24));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->format, "jpeg");
  EXPECT_EQ(j->width, 40);
  EXPECT_EQ(j->height, 24);
}

TEST(UploadImage, ProbesAJpegFrameAfterOtherSegmentsAndFillBytes) {
  // SOI, APP0 (4 bytes of payload), fill bytes, DHT (skipped: shares SOF's range), SOF2
  std::string b = "\xFF\xD8";
  b += std::string("\xFF\xE0\x00\x06JFIF", 8);
  b += "\xFF\xFF";
  b += std::string("\xFF\xC4\x00\x03\x00", 5);
  b += std::string("\xFF\xC2\x00\x11\x08\x01\x2C\x02\x58\x03", 10);  // 8 bit, 300 high, 600 wide
  const auto h = probe_image_header(b);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->format, "jpeg");
  EXPECT_EQ(h->width, 600);
  EXPECT_EQ(h->height, 300);
}

TEST(UploadImage, RefusesWhatHasNoSize) {
  EXPECT_FALSE(probe_image_header(""));
  EXPECT_FALSE(probe_image_header("hello, world: not an image at all"));
  EXPECT_FALSE(probe_image_header(test::png_header(16, 16).substr(0, 20)));  // cut in IHDR
  EXPECT_FALSE(probe_image_header(test::png_header(0, 16)));
  EXPECT_FALSE(probe_image_header(std::string("\xFF\xD8\xFF\xDA\x00\x02", 6)));      // scan first
  EXPECT_FALSE(probe_image_header(std::string("\xFF\xD8\xFF\xC0\x00\x11\x08", 7)));  // cut in SOF
  EXPECT_FALSE(probe_image_header(std::string("\xFF\xD8\xFF\xC0\x00\x11\x08\x00\x00\x00\x10", 11)));
}

TEST(UploadImage, AHugeHeaderIsRefusedBeforeDecoding) {
  // a 33-byte PNG that claims 20000 x 20000 (and 2^32-1 squared, which must not overflow)
  for (const uint32_t side : {20000u, 0xFFFFFFFFu}) {
    const ApiError e = error_of([&] {
      check_upload_image(test::png_header(side, side), "input_reference", kMiB, 16'000'000);
    });
    EXPECT_EQ(e.status(), 422);
    EXPECT_EQ(e.code(), "image_too_many_pixels");
    EXPECT_EQ(e.param(), "input_reference");
    EXPECT_NE(std::string(e.what()).find(std::to_string(side) + "x"), std::string::npos)
        << e.what();
  }
}

TEST(UploadImage, ChecksBytesThenHeaderThenDecode) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  const std::string png = test::png(16, 8);
  EXPECT_EQ(check_upload_image(png, "f", kMiB, 1000).width, 16);
  EXPECT_EQ(error_of([&] { check_upload_image(png, "f", 10, 1000); }).status(), 413);
  EXPECT_EQ(error_of([&] { check_upload_image(png, "f", kMiB, 127); }).code(),
            "image_too_many_pixels");
  EXPECT_EQ(error_of([&] { check_upload_image("GIF89a....", "f", kMiB, 1000); }).code(),
            "invalid_image");
  const ApiError cut = error_of([&] { check_upload_image(png.substr(0, 40), "f", kMiB, 1000); });
  EXPECT_EQ(cut.code(), "invalid_image");
  EXPECT_NE(std::string(cut.what()).find("cannot be decoded"), std::string::npos) << cut.what();
}

// An OpenEXR still (an hdr request's input): sized from its header, the pixel limit checked
// before OpenEXR decodes it, then decoded; a file that only starts like one is refused.
TEST(UploadImage, AnExrStillIsSizedFromItsHeaderThenDecoded) {
  if (!media::openexr_available()) GTEST_SKIP() << "built without OpenEXR";
  const std::string exr = test::exr_still(48, 32);
  EXPECT_TRUE(is_exr_bytes(exr));
  EXPECT_FALSE(is_exr_bytes(test::png()));
  const ImageHeader h = check_upload_image(exr, "f", kMiB, 48 * 32);
  EXPECT_EQ(h.format, "exr");
  EXPECT_EQ(h.width, 48);
  EXPECT_EQ(h.height, 32);
  const ApiError many = error_of([&] { check_upload_image(exr, "f", kMiB, 48 * 32 - 1); });
  EXPECT_EQ(many.code(), "image_too_many_pixels");
  EXPECT_NE(std::string(many.what()).find("48x32"), std::string::npos) << many.what();
  EXPECT_EQ(error_of([&] { check_upload_image(exr, "f", 100, 48 * 32); }).status(), 413);
  for (const size_t cut : {size_t{4}, size_t{60}, exr.size() / 2}) {
    const ApiError e = error_of([&] { check_upload_image(exr.substr(0, cut), "f", kMiB, 1 << 20); });
    EXPECT_EQ(e.code(), "invalid_image") << cut;
    EXPECT_NE(std::string(e.what()).find("cannot be decoded"), std::string::npos) << e.what();
  }
}

TEST(UploadImage, DataUrls) {
  const std::string bytes = "\x01\x02\x03\xFE\xFF";
  EXPECT_EQ(image_from_data_url(test::data_url(bytes), "p", kMiB), bytes);
  EXPECT_EQ(image_from_data_url("DATA:image/png;base64," + test::base64(bytes), "p", kMiB), bytes);
  EXPECT_EQ(image_from_data_url("data:;base64,AQID/v8=", "p", kMiB), bytes);
  EXPECT_EQ(image_from_data_url("data:;base64,AQID_v8", "p", kMiB), bytes);  // URL-safe, unpadded
  EXPECT_EQ(error_of([&] { image_from_data_url("https://example.com/a.png", "p", kMiB); }).code(),
            "unsupported_url");
  EXPECT_EQ(error_of([&] { image_from_data_url("file:///etc/passwd", "p", kMiB); }).code(),
            "unsupported_url");
  EXPECT_EQ(error_of([&] { image_from_data_url("/etc/passwd", "p", kMiB); }).code(),
            "invalid_image");
  EXPECT_EQ(error_of([&] { image_from_data_url("data:image/png,%89PNG", "p", kMiB); }).code(),
            "invalid_image");
  for (const char* bad : {"data:;base64,AQ*D", "data:;base64,AQ==AQ", "data:;base64,AQIDB"})
    EXPECT_EQ(error_of([&] { image_from_data_url(bad, "p", kMiB); }).code(), "invalid_image")
        << bad;
  const ApiError big =
      error_of([&] { image_from_data_url(test::data_url(std::string(400, 'a')), "p", 100); });
  EXPECT_EQ(big.status(), 413);
  EXPECT_EQ(big.param(), "p");
}

}  // namespace
}  // namespace ltx::server
