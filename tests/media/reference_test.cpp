// The media arithmetic against outputs of the reference's own operations, made by torch (CUDA and
// CPU) and PIL on the GPU machine: tests/fixtures/media_reference.safetensors
// (tests/fixtures/gen_media_reference.py; see tests/fixtures/README.md).
#include <gtest/gtest.h>

#include <cmath>

#include "io/safetensors.h"
#include "media/image.h"
#include "media/preprocess.h"
#include "media/yuv.h"
#include "media_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

const io::SafetensorsFile& fixture() {
  static const io::SafetensorsFile f(test::fixture("media_reference.safetensors"));
  return f;
}

// Count of differing elements and the largest difference.
std::pair<int64_t, double> compare(const Tensor& a, const Tensor& b) {
  const auto va = a.to_double_vector(), vb = b.to_double_vector();
  EXPECT_EQ(va.size(), vb.size());
  int64_t n = 0;
  double worst = 0;
  for (size_t i = 0; i < va.size() && i < vb.size(); ++i) {
    const double d = std::fabs(va[i] - vb[i]);
    n += d != 0;
    worst = std::max(worst, d);
  }
  return {n, worst};
}

TEST(MediaReference, YuvMatchesTorchExactly) {
  const Tensor in = fixture().tensor("yuv.in");  // [F, H, W, 3] f32
  const int64_t F = in.size(0), H = in.size(1), W = in.size(2);
  for (const char* dev : {"cuda", "cpu"})
    for (const char* dt : {"f32", "bf16"}) {
      const std::string key = std::string("yuv.") + dev + "_" + dt;
      const Tensor ref = fixture().tensor(key).reshape({F, -1});  // Y | U | V per frame
      const media::Yuv420Frames got =
          media::rgb_to_yuv420_bt709(std::string(dt) == "f32" ? in : in.to(DType::BF16));
      const int64_t ny = H * W, nc = (H / 2) * (W / 2);
      const auto [dy, wy] = compare(got.y.reshape({F, ny}), ref.narrow(1, 0, ny));
      const auto [du, wu] = compare(got.u.reshape({F, nc}), ref.narrow(1, ny, nc));
      const auto [dv, wv] = compare(got.v.reshape({F, nc}), ref.narrow(1, ny + nc, nc));
      // Bit for bit, in f32 and bf16, against CUDA and CPU torch alike.
      EXPECT_EQ(dy + du + dv, 0) << key << ": " << dy << " " << du << " " << dv
                                 << " codes differ, by up to " << std::max({wy, wu, wv});
    }
}

TEST(MediaReference, RgbUint8MatchesTorch) {
  const Tensor in = fixture().tensor("yuv.in");
  for (const char* dev : {"cuda", "cpu"}) {
    EXPECT_EQ(compare(media::rgb_to_uint8(in), fixture().tensor(std::string("rgb.") + dev + "_f32"))
                  .first,
              0)
        << dev;
    EXPECT_EQ(compare(media::rgb_to_uint8(in.to(DType::BF16)),
                      fixture().tensor(std::string("rgb.") + dev + "_bf16"))
                  .first,
              0)
        << dev;
  }
}

TEST(MediaReference, ResizeCropNormalizeMatchesTorch) {
  for (int i = 0; fixture().contains("resize." + std::to_string(i) + ".in"); ++i) {
    const std::string p = "resize." + std::to_string(i) + ".";
    const Tensor img = fixture().tensor(p + "in");
    const auto size = fixture().tensor(p + "size").to_int_vector();
    const Tensor got =
        media::normalize_to_unit_range(media::resize_and_center_crop(img, size[0], size[1]));
    for (const char* dev : {"cuda", "cpu"}) {
      const Tensor ref = fixture().tensor(p + dev);
      ASSERT_EQ(got.shape(), ref.shape()) << p << dev;
      EXPECT_LE(test::max_abs_diff(got, ref), 2e-6) << p << dev;
    }
  }
}

TEST(MediaReference, DecodeImageMatchesPil) {
  LTX_REQUIRE_IMAGE_IO();
  int cases = 0;
  for (const std::string& name : fixture().names()) {
    if (name.rfind("decode.", 0) != 0 || name.size() < 5 || name.substr(name.size() - 5) != ".file")
      continue;
    const std::string base = name.substr(0, name.size() - 5);
    const Tensor file = fixture().tensor(name);
    const Tensor ref = fixture().tensor(base + ".out");
    const Tensor got =
        media::decode_image(static_cast<const uint8_t*>(file.raw_data()), file.nbytes(), base);
    ASSERT_EQ(got.shape(), ref.shape()) << base;
    const auto [n, worst] = compare(got, ref);
    // Bit for bit, ICC conversions included (lcms2 2.14 here, PIL's own in its wheels).
    EXPECT_EQ(n, 0) << base << ": " << n << " values differ, by up to " << worst;
    ++cases;
  }
  EXPECT_GE(cases, 10);
}

}  // namespace
}  // namespace ltx
