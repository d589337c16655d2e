// Image reading (PNG / JPEG, orientation, alpha, gray, ICC), PNG / JPEG writing and PNG frame
// folders.
#include "media/image.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "media/exif.h"
#include "media/yuv.h"
#include "media_test_util.h"
#include "support/test_support.h"

#if LTX_TEST_LCMS2
#include <lcms2.h>
#endif

namespace ltx {
namespace {

using Bytes = std::vector<uint8_t>;

uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put_be32(Bytes& b, uint32_t v) {
  for (int i = 3; i >= 0; --i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A PNG chunk (length, type, data, CRC) inserted right after IHDR.
Bytes with_png_chunk(const Bytes& png, const char* type, const Bytes& data) {
  Bytes chunk;
  put_be32(chunk, static_cast<uint32_t>(data.size()));
  Bytes body(type, type + 4);
  body.insert(body.end(), data.begin(), data.end());
  chunk.insert(chunk.end(), body.begin(), body.end());
  put_be32(chunk, crc32(body.data(), body.size()));
  // Signature (8) + IHDR (25), the chunk, the rest. (Sized up front: g++ 12 -O3 reports a false
  // -Warray-bounds for the insert-based version.)
  Bytes out(png.size() + chunk.size());
  std::copy(png.begin(), png.begin() + 33, out.begin());
  std::copy(chunk.begin(), chunk.end(), out.begin() + 33);
  std::copy(png.begin() + 33, png.end(), out.begin() + 33 + static_cast<long>(chunk.size()));
  return out;
}

// A JPEG APP1 segment inserted right after SOI.
Bytes with_jpeg_app1(const Bytes& jpeg, const Bytes& payload) {
  Bytes out(jpeg.begin(), jpeg.begin() + 2);
  out.push_back(0xFF);
  out.push_back(0xE1);
  const size_t len = payload.size() + 2;
  out.push_back(static_cast<uint8_t>(len >> 8));
  out.push_back(static_cast<uint8_t>(len));
  out.insert(out.end(), payload.begin(), payload.end());
  out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
  return out;
}

// TIFF block with IFD0 = {an unrelated tag, Orientation}, either byte order.
Bytes tiff_orientation(int orientation, bool little_endian, bool exif_prefix) {
  Bytes b;
  if (exif_prefix) b = {'E', 'x', 'i', 'f', 0, 0};
  auto u16 = [&](uint32_t v) {
    if (little_endian) {
      b.push_back(static_cast<uint8_t>(v));
      b.push_back(static_cast<uint8_t>(v >> 8));
    } else {
      b.push_back(static_cast<uint8_t>(v >> 8));
      b.push_back(static_cast<uint8_t>(v));
    }
  };
  auto u32 = [&](uint32_t v) {
    if (little_endian) {
      u16(v & 0xFFFF);
      u16(v >> 16);
    } else {
      u16(v >> 16);
      u16(v & 0xFFFF);
    }
  };
  b.push_back(little_endian ? 'I' : 'M');
  b.push_back(little_endian ? 'I' : 'M');
  u16(42);
  u32(8);
  u16(2);
  u16(0x010F), u16(2), u32(4), u32(0x00414243);  // Make, ASCII "CBA"
  u16(0x0112), u16(3), u32(1), u16(static_cast<uint32_t>(orientation)), u16(0);
  u32(0);
  return b;
}

Bytes tensor_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return Bytes(p, p + c.nbytes());
}

// src = [[a b c] [d e f]] with pixel values 10*k..10*k+2 for k = a..f.
Tensor six_pixels() {
  Tensor t = Tensor::empty({2, 3, 3}, DType::U8);
  for (int k = 0; k < 6; ++k)
    for (int c = 0; c < 3; ++c)
      t.data<uint8_t>()[3 * k + c] = static_cast<uint8_t>(10 * (k + 1) + c);
  return t;
}
// Expected layouts by letter index (a = 0 ... f = 5).
Tensor from_letters(int64_t h, int64_t w, const std::vector<int>& letters) {
  Tensor t = Tensor::empty({h, w, 3}, DType::U8);
  for (size_t i = 0; i < letters.size(); ++i)
    for (int c = 0; c < 3; ++c)
      t.data<uint8_t>()[3 * i + c] = static_cast<uint8_t>(10 * (letters[i] + 1) + c);
  return t;
}

TEST(Exif, ParsesOrientationInBothByteOrders) {
  for (bool le : {true, false})
    for (bool prefix : {true, false}) {
      const Bytes b = tiff_orientation(6, le, prefix);
      EXPECT_EQ(media::exif_orientation(b.data(), b.size()), 6) << le << prefix;
    }
  const Bytes junk = {'I', 'I', 42, 0, 200, 0, 0, 0};
  EXPECT_EQ(media::exif_orientation(junk.data(), junk.size()), 0);
  EXPECT_EQ(media::exif_orientation(nullptr, 0), 0);
  const Bytes cut = tiff_orientation(6, true, false);
  EXPECT_EQ(media::exif_orientation(cut.data(), cut.size() - 10), 0);  // entry cut off
  EXPECT_EQ(media::xmp_orientation("<x tiff:Orientation=\"8\"/>"), 8);
  EXPECT_EQ(media::xmp_orientation("<tiff:Orientation>3</tiff:Orientation>"), 3);
  EXPECT_EQ(media::xmp_orientation("tiff:OrientationX=\"3\""), 0);
}

TEST(Image, PngOrientationRotatesLikeTheReference) {
  LTX_REQUIRE_IMAGE_IO();
  const Bytes png = media::encode_png(six_pixels());
  struct Case {
    int orientation;
    Tensor expect;
  };
  const std::vector<Case> cases = {
      {1, six_pixels()},
      {2, six_pixels()},  // mirrored orientations are not applied (as the reference)
      {3, from_letters(2, 3, {5, 4, 3, 2, 1, 0})},
      {6, from_letters(3, 2, {3, 0, 4, 1, 5, 2})},  // 90° clockwise
      {8, from_letters(3, 2, {2, 5, 1, 4, 0, 3})},  // 90° counter-clockwise
  };
  for (const Case& c : cases) {
    const Bytes file =
        with_png_chunk(png, "eXIf", tiff_orientation(c.orientation, c.orientation % 2, false));
    const Tensor got = media::decode_image(file.data(), file.size(), "mem.png");
    ASSERT_EQ(got.shape(), c.expect.shape()) << c.orientation;
    EXPECT_EQ(tensor_bytes(got), tensor_bytes(c.expect)) << c.orientation;
  }
  // ImageMagick's hex "Raw profile type exif" text chunk.
  const Bytes tiff = tiff_orientation(3, true, true);
  std::string text = "Raw profile type exif";
  text.push_back('\0');
  text += "\nexif\n      " + std::to_string(tiff.size()) + "\n";
  for (uint8_t b : tiff) {
    char h[3];
    std::snprintf(h, sizeof(h), "%02x", b);
    text += h;
  }
  const Bytes raw = with_png_chunk(png, "tEXt", Bytes(text.begin(), text.end()));
  EXPECT_EQ(tensor_bytes(media::decode_image(raw.data(), raw.size(), "raw.png")),
            tensor_bytes(from_letters(2, 3, {5, 4, 3, 2, 1, 0})));
}

// Left half red, right half blue; 16 x 32, so JPEG blocks do not mix the halves.
Tensor halves() {
  Tensor t = Tensor::zeros({16, 32, 3}, DType::U8);
  for (int64_t h = 0; h < 16; ++h)
    for (int64_t w = 0; w < 32; ++w) t.data<uint8_t>()[(h * 32 + w) * 3 + (w < 16 ? 0 : 2)] = 220;
  return t;
}

// Mean of one channel over rows [r0, r1).
double mean_rows(const Tensor& img, int64_t r0, int64_t r1, int c) {
  double s = 0;
  for (int64_t h = r0; h < r1; ++h)
    for (int64_t w = 0; w < img.size(1); ++w)
      s += img.data<uint8_t>()[(h * img.size(1) + w) * 3 + c];
  return s / static_cast<double>((r1 - r0) * img.size(1));
}

TEST(Image, JpegExifAndXmpOrientation) {
  LTX_REQUIRE_IMAGE_IO();
  const Bytes jpeg = media::encode_jpeg(halves(), 95);
  const Tensor plain = media::decode_image(jpeg.data(), jpeg.size(), "plain.jpg");
  ASSERT_EQ(plain.shape(), (Shape{16, 32, 3}));
  // EXIF 6: 90° clockwise, the left (red) half ends on top.
  const Bytes exif = with_jpeg_app1(jpeg, tiff_orientation(6, false, true));
  const Tensor r6 = media::decode_image(exif.data(), exif.size(), "exif.jpg");
  ASSERT_EQ(r6.shape(), (Shape{32, 16, 3}));
  EXPECT_GT(mean_rows(r6, 0, 16, 0), 200);
  EXPECT_LT(mean_rows(r6, 0, 16, 2), 20);
  EXPECT_GT(mean_rows(r6, 16, 32, 2), 200);
  // XMP 8: 90° counter-clockwise, the red half ends at the bottom.
  std::string xmp = "http://ns.adobe.com/xap/1.0/";
  xmp.push_back('\0');
  xmp += "<x:xmpmeta><rdf:Description tiff:Orientation=\"8\"/></x:xmpmeta>";
  const Bytes x = with_jpeg_app1(jpeg, Bytes(xmp.begin(), xmp.end()));
  const Tensor r8 = media::decode_image(x.data(), x.size(), "xmp.jpg");
  ASSERT_EQ(r8.shape(), (Shape{32, 16, 3}));
  EXPECT_GT(mean_rows(r8, 0, 16, 2), 200);
  EXPECT_GT(mean_rows(r8, 16, 32, 0), 200);
  // JPEG pixels are close to the source (quality 95) away from the colour edge, where the 4:2:0
  // chroma is interpolated across it.
  EXPECT_LE(test::max_abs_diff(plain.narrow(1, 0, 12), halves().narrow(1, 0, 12)), 8);
  EXPECT_LE(test::max_abs_diff(plain.narrow(1, 20, 12), halves().narrow(1, 20, 12)), 8);
}

TEST(Image, PngRoundTripGrayAndAlpha) {
  LTX_REQUIRE_IMAGE_IO();
  test::TempDir dir;
  const Tensor rgb = test::pattern_u8(7, 5, 3, 1);
  media::write_png(dir.file("a/rgb.png"), rgb);
  EXPECT_EQ(tensor_bytes(media::read_image(dir.file("a/rgb.png"))), tensor_bytes(rgb));
  // Strided input writes the same pixels.
  media::write_png(dir.file("s.png"), test::non_contiguous_copy(rgb));
  EXPECT_EQ(tensor_bytes(media::read_image(dir.file("s.png"))), tensor_bytes(rgb));

  const Tensor gray = test::pattern_u8(4, 9, 1, 2);
  media::write_png(dir.file("g.png"), gray);
  const Tensor g = media::read_image(dir.file("g.png"));
  ASSERT_EQ(g.shape(), (Shape{4, 9, 3}));
  for (int c = 0; c < 3; ++c) EXPECT_EQ(tensor_bytes(g.narrow(2, c, 1)), tensor_bytes(gray)) << c;

  const Tensor rgba = test::pattern_u8(3, 3, 4, 3);
  media::write_png(dir.file("rgba.png"), rgba);
  const Tensor d = media::read_image(dir.file("rgba.png"));
  EXPECT_EQ(tensor_bytes(d), tensor_bytes(rgba.narrow(2, 0, 3)));  // alpha dropped, not blended
  EXPECT_FALSE(std::filesystem::exists(dir.file("rgba.png.tmp")));
}

#if LTX_TEST_LCMS2
TEST(Image, IccProfileIsConvertedToSrgb) {
  LTX_REQUIRE_IMAGE_IO();
  // A linear-light (gamma 1) profile with sRGB's primaries and white: the pixels must come back
  // sRGB-encoded, e.g. linear 0.5 -> about 188.
  cmsCIExyY d65 = {0.3127, 0.3290, 1.0};
  cmsCIExyYTRIPLE prim = {{0.64, 0.33, 1.0}, {0.30, 0.60, 1.0}, {0.15, 0.06, 1.0}};
  cmsToneCurve* lin = cmsBuildGamma(nullptr, 1.0);
  cmsToneCurve* curves[3] = {lin, lin, lin};
  cmsHPROFILE p = cmsCreateRGBProfile(&d65, &prim, curves);
  cmsUInt32Number size = 0;
  ASSERT_TRUE(cmsSaveProfileToMem(p, nullptr, &size));
  Bytes icc(size);
  ASSERT_TRUE(cmsSaveProfileToMem(p, icc.data(), &size));
  cmsCloseProfile(p);
  cmsFreeToneCurve(lin);

  Tensor img = Tensor::empty({1, 3, 3}, DType::U8);
  const uint8_t vals[9] = {128, 128, 128, 0, 0, 0, 255, 255, 255};
  std::memcpy(img.raw_data(), vals, 9);
  // iCCP: name, 0, compression 0, zlib stream. Build the zlib stream with stored blocks.
  Bytes z = {0x78, 0x01, 0x01};
  z.push_back(static_cast<uint8_t>(icc.size()));
  z.push_back(static_cast<uint8_t>(icc.size() >> 8));
  z.push_back(static_cast<uint8_t>(~icc.size()));
  z.push_back(static_cast<uint8_t>(~icc.size() >> 8));
  z.insert(z.end(), icc.begin(), icc.end());
  uint32_t a = 1, b = 0;
  for (uint8_t v : icc) {
    a = (a + v) % 65521;
    b = (b + a) % 65521;
  }
  put_be32(z, (b << 16) | a);
  Bytes iccp = {'l', 'i', 'n', 0, 0};
  iccp.insert(iccp.end(), z.begin(), z.end());
  ASSERT_LT(icc.size(), 65535u);
  const Bytes png = with_png_chunk(media::encode_png(img), "iCCP", iccp);
  const Tensor got = media::decode_image(png.data(), png.size(), "linear.png");
  const auto v = got.to_int_vector();
  for (int c = 0; c < 3; ++c) {
    EXPECT_NEAR(v[c], 188, 2) << c;
    EXPECT_EQ(v[3 + c], 0);
    EXPECT_NEAR(v[6 + c], 255, 1);
  }
}
#endif

TEST(Image, BadFilesGiveClearErrors) {
  LTX_REQUIRE_IMAGE_IO();
  test::TempDir dir;
  test::write_bytes(dir.file("junk.png"), "this is not an image at all");
  test::expect_error_containing([&] { media::read_image(dir.file("junk.png")); },
                                {"junk.png", "not a PNG or JPEG"});
  test::write_bytes(dir.file("empty.jpg"), "");
  test::expect_error_containing([&] { media::read_image(dir.file("empty.jpg")); },
                                {"empty.jpg", "not a PNG or JPEG"});
  test::expect_error_containing([&] { media::read_image(dir.file("missing.png")); },
                                {"missing.png", "cannot open"});

  const Bytes png = media::encode_png(test::pattern_u8(32, 32, 3, 4));
  const Bytes cut(png.begin(), png.begin() + static_cast<long>(png.size() / 2));
  test::expect_error_containing([&] { media::decode_image(cut.data(), cut.size(), "cut.png"); },
                                {"cut.png", "PNG"});
  Bytes corrupt = png;
  corrupt[40] ^= 0xFF;  // breaks a CRC
  test::expect_error_containing(
      [&] { media::decode_image(corrupt.data(), corrupt.size(), "crc.png"); }, {"crc.png"});

  const Bytes jpeg = media::encode_jpeg(test::pattern_u8(32, 32, 3, 5), 90);
  const Bytes jcut(jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() / 2));
  test::expect_error_containing([&] { media::decode_image(jcut.data(), jcut.size(), "cut.jpg"); },
                                {"cut.jpg", "JPEG"});
  const Bytes jhead(jpeg.begin(), jpeg.begin() + 20);
  test::expect_error_containing(
      [&] { media::decode_image(jhead.data(), jhead.size(), "head.jpg"); }, {"head.jpg"});
}

// A PNG signature + IHDR chunk declaring width x height (no pixel data follows).
Bytes png_header(uint32_t width, uint32_t height) {
  Bytes b = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  put_be32(b, 13);
  Bytes body = {'I', 'H', 'D', 'R'};
  put_be32(body, width);
  put_be32(body, height);
  for (uint8_t v : {8, 2, 0, 0, 0}) body.push_back(v);  // 8-bit RGB
  b.insert(b.end(), body.begin(), body.end());
  put_be32(b, crc32(body.data(), body.size()));
  return b;
}

// Found by fuzz_image (tests/fuzz/regressions/image/): a 472-byte JPEG whose SOF declares
// 17232x26947 pixels made the reader allocate 2.8 GB before decoding a scanline. A PNG's IHDR
// can declare up to 65535x65535 the same way.
TEST(Image, RefusesImagesOverThePixelLimitBeforeAllocating) {
  LTX_REQUIRE_IMAGE_IO();
  std::ifstream in(std::string(LTX_TESTS_DIR) + "/fuzz/regressions/image/jpeg_sof_26947x17232.jpg",
                   std::ios::binary);
  ASSERT_TRUE(in);
  const Bytes jpeg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string limit = std::to_string(media::kMaxImagePixels);
  test::expect_error_containing([&] { media::decode_image(jpeg.data(), jpeg.size(), "big.jpg"); },
                                {"big.jpg", "17232x26947", limit});
  const Bytes png = with_png_chunk(png_header(65535, 65535), "IDAT", {0x78, 0x9C});
  test::expect_error_containing([&] { media::decode_image(png.data(), png.size(), "big.png"); },
                                {"big.png", "65535x65535", limit});
  // Under the limit an image still decodes as far as its data goes (here: none).
  const Bytes fits = with_png_chunk(png_header(16384, 8192), "IDAT", {0x78, 0x9C});
  const std::string err = test::error_of([&] { media::decode_image(fits.data(), fits.size(), "f.png"); });
  EXPECT_EQ(err.find(limit), std::string::npos) << err;
}

TEST(ImageProbe, ReadsTheSizeFromTheHeaderAlone) {
  // Encoded images need libpng / libjpeg; the probe itself does not.
  if (media::image_io_available()) {
    const Bytes png = media::encode_png(test::pattern_u8(24, 40, 3, 1));
    const media::ImageInfo p = media::probe_image(png.data(), png.size(), "a.png");
    EXPECT_EQ(p.format, "png");
    EXPECT_EQ(p.width, 40);
    EXPECT_EQ(p.height, 24);
    // A JPEG with an APP1 segment before its frame header.
    const Bytes jpeg = with_jpeg_app1(media::encode_jpeg(test::pattern_u8(24, 40, 3, 2), 90),
                                      Bytes(100, 0x00));
    const media::ImageInfo j = media::probe_image(jpeg.data(), jpeg.size(), "a.jpg");
    EXPECT_EQ(j.format, "jpeg");
    EXPECT_EQ(j.width, 40);
    EXPECT_EQ(j.height, 24);
    // Cut right after the header: the probe needs no more.
    const media::ImageInfo cut = media::probe_image(png.data(), 33, "cut.png");
    EXPECT_EQ(cut.width, 40);
  }
  // A 20000 x 20000 header with no pixels behind it: the size, with nothing decoded (decoding
  // would need 1.2 GB).
  const Bytes bomb = png_header(20000, 20000);
  const media::ImageInfo b = media::probe_image(bomb.data(), bomb.size(), "bomb.png");
  EXPECT_EQ(b.width, 20000);
  EXPECT_EQ(b.height, 20000);
  // A baseline JPEG frame header (SOF0) for 30000 x 10000.
  const Bytes sof = {0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x27, 0x10, 0x75, 0x30, 0x03};
  const media::ImageInfo s = media::probe_image(sof.data(), sof.size(), "big.jpg");
  EXPECT_EQ(s.format, "jpeg");
  EXPECT_EQ(s.width, 30000);
  EXPECT_EQ(s.height, 10000);
}

TEST(ImageProbe, BadHeadersGiveClearErrors) {
  const Bytes bomb = png_header(20000, 20000);
  const auto probe = [](const Bytes& b, const char* name) {
    return [b, name] { media::probe_image(b.data(), b.size(), name); };
  };
  test::expect_error_containing(probe(Bytes(bomb.begin(), bomb.begin() + 20), "t.png"),
                                {"t.png", "PNG file is truncated before its size"});
  test::expect_error_containing(probe({'G', 'I', 'F', '8', '9', 'a', 1, 0}, "x.gif"),
                                {"x.gif", "not a PNG or JPEG"});
  test::expect_error_containing(probe({}, "empty"), {"empty", "not a PNG or JPEG"});
  test::expect_error_containing(probe(png_header(0, 5), "zero.png"),
                                {"zero.png", "declares a size of 0x5"});
  Bytes not_ihdr = bomb;
  not_ihdr[12] = 'X';
  test::expect_error_containing(probe(not_ihdr, "n.png"), {"n.png", "first chunk is not IHDR"});
  test::expect_error_containing(probe({0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, 0x4A}, "t.jpg"),
                                {"t.jpg", "JPEG file is truncated before its size"});
  test::expect_error_containing(probe({0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x27}, "s.jpg"),
                                {"s.jpg", "truncated before its size"});
  test::expect_error_containing(probe({0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x08}, "scan.jpg"),
                                {"scan.jpg", "no frame header before its scan data"});
  test::expect_error_containing(probe({0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x01}, "len.jpg"),
                                {"len.jpg", "invalid length 1"});
}

TEST(Image, WriterArgumentErrors) {
  LTX_REQUIRE_IMAGE_IO();
  test::expect_error_containing([] { media::encode_png(Tensor::zeros({2, 2, 3})); }, {"u8"});
  test::expect_error_containing(
      [] {
        media::encode_png(Tensor::zeros({2, 2, 2}, DType::U8));
      },
      {"channels"});
  test::expect_error_containing(
      [] {
        media::encode_jpeg(Tensor::zeros({2, 2, 3}, DType::U8), 0);
      },
      {"quality"});
}

TEST(PngFrames, WritesNumberedFramesInChunksAtomically) {
  LTX_REQUIRE_IMAGE_IO();
  test::TempDir dir;
  const std::string out = dir.file("frames");
  const Tensor a = test::random_tensor({2, 4, 6, 3}, 1, -0.1f, 1.1f);
  const Tensor b = test::random_tensor({1, 4, 6, 3}, 2, 0.f, 1.f);
  {
    media::PngFrameWriter w(out);
    w.write_frames(a);
    w.write_frames(b.select(0, 0));              // a single [H, W, 3] frame
    EXPECT_FALSE(std::filesystem::exists(out));  // still under the temporary name
    w.finish();
    EXPECT_EQ(w.frames_written(), 3);
  }
  EXPECT_EQ(test::list_dir(out),
            (std::vector<std::string>{"frame_00000.png", "frame_00001.png", "frame_00002.png"}));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  EXPECT_EQ(tensor_bytes(media::read_image(out + "/frame_00001.png")),
            tensor_bytes(media::rgb_to_uint8(a.select(0, 1))));
  EXPECT_EQ(tensor_bytes(media::read_image(out + "/frame_00002.png")),
            tensor_bytes(media::rgb_to_uint8(b.select(0, 0))));

  // A non-empty folder is not replaced; an abandoned writer leaves nothing.
  test::expect_error_containing([&] { media::write_png_frames(out, a); },
                                {"frames", "not an empty folder"});
  {
    media::PngFrameWriter w(dir.file("abandoned"));
    w.write_frames(a);
  }
  EXPECT_EQ(test::list_dir(dir.file("")), (std::vector<std::string>{"frames"}));
}

TEST(Image, WithoutImageIoSaysHowToRebuild) {
  if (media::image_io_available()) GTEST_SKIP() << "built with image I/O";
  test::TempDir dir;
  test::expect_error_containing([&] { media::read_image(dir.file("a.png")); },
                                {"a.png", "no image I/O support", "-DLTX_IMAGE_IO=ON"});
  test::expect_error_containing(
      [&] {
        media::write_png_frames(dir.file("f"), Tensor::zeros({1, 2, 2, 3}));
      },
      {"no image I/O support"});
  EXPECT_TRUE(test::list_dir(dir.file("")).empty());
}

}  // namespace
}  // namespace ltx
