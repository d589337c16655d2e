// HDR working-space curves, primaries, the VAE range map, the HLG signal, its 10-bit BT.2020
// packing and the HLG MP4 master, against double-precision evaluations of the reference's
// formulas (ltx_core/hdr.py, ltx_core/color/{primaries,hlg,yuv}.py) and published anchor values.
#include "media/hdr.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "media/video_reader.h"
#include "media/video_writer.h"
#include "media/yuv.h"
#include "media_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using media::HdrTransfer;
using media::Primaries;

// The reference's formulas in f64.
double logc3_compress(double x) {
  x = std::max(x, 0.0);
  const double y = x >= 0.010591 ? 0.247190 * std::log10(5.555556 * x + 0.052272) + 0.385537
                                 : 5.367655 * x + 0.092809;
  return std::clamp(y, 0.0, 1.0);
}
double logc3_decompress(double v) {
  v = std::clamp(v, 0.0, 1.0);
  return v >= 5.367655 * 0.010591 + 0.092809
             ? (std::pow(10.0, (v - 0.385537) / 0.247190) - 0.052272) / 5.555556
             : (v - 0.092809) / 5.367655;
}
double acescct_compress(double x) {
  x = std::max(x, 0.0);
  const double y = x > 0.0078125 ? (std::log2(std::max(x, 1e-12)) + 9.72) / 17.52
                                 : 10.5402377416545 * x + 0.0729055341958355;
  return std::clamp(y, 0.0, 1.0);
}
double acescct_decompress(double v) {
  v = std::clamp(v, 0.0, 1.0);
  return v > 0.155251141552511 ? std::pow(2.0, v * 17.52 - 9.72)
                               : (v - 0.0729055341958355) / 10.5402377416545;
}

constexpr double kAcescgTo709[3][3] = {
    {1.70505, -0.62179, -0.08326}, {-0.13026, 1.14080, -0.01055}, {-0.02400, -0.12897, 1.15297}};
constexpr double k709To2020[3][3] = {{0.62740389, 0.32928304, 0.04331307},
                                     {0.06909729, 0.91954040, 0.01136232},
                                     {0.01639144, 0.08801331, 0.89559525}};

void expect_close(double got, double want, double rel, const std::string& what) {
  EXPECT_NEAR(got, want, rel * std::max(1.0, std::abs(want))) << what;
}

// Values over the whole curve: below the cuts, around them, mid-grey, highlights.
std::vector<float> sweep() {
  std::vector<float> v = {0.0f,  1e-6f, 0.005f, 0.0078125f, 0.0079f, 0.010591f, 0.0106f,
                          0.18f, 0.5f,  1.0f,   2.5f,       16.0f,   55.0f,     -0.3f};
  for (int i = 1; i < 200; ++i) v.push_back(std::pow(2.0f, -12.0f + 0.09f * static_cast<float>(i)));
  return v;
}

TEST(HdrTransfer, LogC3MatchesTheReferenceFormulas) {
  // ARRI's published LogC3 (EI 800) code of 18% grey.
  EXPECT_NEAR(media::hdr_compress(HdrTransfer::LogC3, 0.18f), 0.391007, 2e-6);
  EXPECT_NEAR(media::hdr_compress(HdrTransfer::LogC3, 0.0f), 0.092809, 1e-7);
  for (float x : sweep()) {
    const float c = media::hdr_compress(HdrTransfer::LogC3, x);
    expect_close(c, logc3_compress(x), 2e-6, "compress " + std::to_string(x));
    const float d = media::hdr_decompress(HdrTransfer::LogC3, c);
    expect_close(d, logc3_decompress(c), 2e-5, "decompress " + std::to_string(c));
    if (x >= 0.0f && c < 1.0f) expect_close(d, x, 2e-4, "round trip " + std::to_string(x));
  }
  // The decode range: code 1 is about 55.1 scene-linear; codes outside [0, 1] are clamped.
  EXPECT_NEAR(media::hdr_decompress(HdrTransfer::LogC3, 1.0f), logc3_decompress(1.0), 1e-3);
  EXPECT_EQ(media::hdr_decompress(HdrTransfer::LogC3, 1.5f),
            media::hdr_decompress(HdrTransfer::LogC3, 1.0f));
  EXPECT_EQ(media::hdr_decompress(HdrTransfer::LogC3, -0.5f),
            media::hdr_decompress(HdrTransfer::LogC3, 0.0f));
}

TEST(HdrTransfer, AcesCctMatchesTheReferenceFormulas) {
  // ACEScct of 18% grey (S-2016-001): 0.4135884.
  EXPECT_NEAR(media::hdr_compress(HdrTransfer::ACEScct, 0.18f), 0.4135884, 2e-6);
  for (float x : sweep()) {
    const float c = media::hdr_compress(HdrTransfer::ACEScct, x);
    expect_close(c, acescct_compress(x), 2e-6, "compress " + std::to_string(x));
    const float d = media::hdr_decompress(HdrTransfer::ACEScct, c);
    expect_close(d, acescct_decompress(c), 2e-5, "decompress " + std::to_string(c));
  }
}

TEST(HdrTransfer, TensorsConvertPrimariesAndClamp) {
  // [2, 2, 3] working codes.
  const std::vector<float> codes = {0.1f,  0.4f, 0.9f,  0.0f,  1.0f,  0.5f,
                                    0.62f, 0.2f, 0.05f, 0.33f, 0.33f, 0.33f};
  const Tensor working = Tensor::from_vector(codes, Shape({2, 2, 3}));
  // LogC3 is defined on Rec.709: no matrix.
  const Tensor lin = media::hdr_to_linear(working, HdrTransfer::LogC3);
  ASSERT_EQ(lin.shape(), working.shape());
  for (size_t i = 0; i < codes.size(); ++i)
    expect_close(lin.data<float>()[i], std::max(0.0, logc3_decompress(codes[i])), 2e-5, "logc3");
  // ACEScct lands in ACEScg: rotated to Rec.709, negatives clamped to 0.
  const Tensor lin709 = media::hdr_to_linear(working, HdrTransfer::ACEScct);
  bool any_clamped = false;
  for (int p = 0; p < 4; ++p) {
    double ap1[3];
    for (int c = 0; c < 3; ++c) ap1[c] = acescct_decompress(codes[static_cast<size_t>(3 * p + c)]);
    for (int d = 0; d < 3; ++d) {
      const double raw =
          kAcescgTo709[d][0] * ap1[0] + kAcescgTo709[d][1] * ap1[1] + kAcescgTo709[d][2] * ap1[2];
      any_clamped = any_clamped || raw < 0;
      expect_close(lin709.data<float>()[3 * p + d], std::max(0.0, raw), 5e-5,
                   "acescct pixel " + std::to_string(p));
    }
  }
  EXPECT_TRUE(any_clamped);  // the saturated orange pixel leaves the Rec.709 gamut
  EXPECT_EQ(lin709.shape(), working.shape());
  // The working-space map inverts it within the range the curve keeps.
  const Tensor back = media::hdr_to_working_space(media::hdr_to_linear(working, HdrTransfer::LogC3),
                                                  HdrTransfer::LogC3);
  for (size_t i = 0; i < codes.size(); ++i)
    EXPECT_NEAR(back.data<float>()[i], std::max(codes[i], 0.092809f), 2e-6) << i;
  // Rec.709 <-> ACEScg matrices are inverses (the reference inverts in f64).
  const auto a = media::primaries_matrix(Primaries::Rec709, Primaries::ACEScg);
  const auto b = media::primaries_matrix(Primaries::ACEScg, Primaries::Rec709);
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += static_cast<double>(b[r][k]) * a[k][c];
      EXPECT_NEAR(s, r == c ? 1.0 : 0.0, 1e-6) << r << "," << c;
    }
  test::expect_error_containing([&] { media::parse_hdr_transfer("pq", "--hdr-lora x"); },
                                {"--hdr-lora x", "unknown HDR transfer 'pq'", "logc3 or acescct"});
  EXPECT_EQ(media::parse_hdr_transfer("acescct", "x"), HdrTransfer::ACEScct);
  EXPECT_EQ(media::hdr_transfer_display_name(HdrTransfer::LogC3), "LogC3");
}

TEST(HdrTransfer, VaeRangeMap) {
  const Tensor x = Tensor::from_vector(std::vector<float>{0.0f, 0.25f, 1.0f}, Shape({3}));
  const Tensor z = media::to_vae_range(x, "frames");
  EXPECT_EQ(z.to_float_vector(), (std::vector<float>{-1.0f, -0.5f, 1.0f}));
  test::expect_error_containing(
      [&] {
        media::to_vae_range(Tensor::from_vector(std::vector<float>{0.5f, 1.5f}, Shape({2})),
                            "clip.exr");
      },
      {"clip.exr", "[0, 1]", "max 1.5"});
  const Tensor back = media::from_vae_range(
      Tensor::from_vector(std::vector<float>{-1.5f, -0.5f, 0.2f, 3.0f}, Shape({4})));
  EXPECT_EQ(back.to_float_vector(), (std::vector<float>{0.0f, 0.25f, 0.6f, 1.0f}));
}

TEST(HdrColorSpace, NamesTagsAndPrimariesAsTheReference) {
  using media::HdrColorSpace;
  EXPECT_EQ(media::parse_hdr_color_space("srgb_linear", "--hdr"), HdrColorSpace::SrgbLinear);
  EXPECT_EQ(media::parse_hdr_color_space("ACEScg", "--hdr"), HdrColorSpace::ACEScg);
  EXPECT_EQ(media::parse_hdr_color_space("ACESCCT", "--hdr"), HdrColorSpace::ACEScct);
  test::expect_error_containing([] { media::parse_hdr_color_space("pq", "--hdr"); },
                                {"invalid --hdr 'pq'", "choose from SRGB_LINEAR, ACESCG, ACESCCT"});
  EXPECT_EQ(media::hdr_color_space_name(HdrColorSpace::SrgbLinear), "SRGB_LINEAR");
  EXPECT_EQ(media::hdr_source_primaries(HdrColorSpace::SrgbLinear), Primaries::Rec709);
  EXPECT_EQ(media::hdr_source_primaries(HdrColorSpace::ACEScg), Primaries::ACEScg);
  EXPECT_EQ(media::hdr_source_primaries(HdrColorSpace::ACEScct), Primaries::ACEScg);
  EXPECT_TRUE(media::hdr_is_log_working(HdrColorSpace::ACEScct));
  EXPECT_FALSE(media::hdr_is_log_working(HdrColorSpace::ACEScg));
  EXPECT_EQ(media::kHdrWorkingTransfer, HdrTransfer::ACEScct);
}

TEST(HdrColorSpace, ExrFramesOfTheDecodeFollowTheSpace) {
  using media::HdrColorSpace;
  const std::vector<float> codes = {0.1f, 0.4f, 0.9f, 0.0f, 1.0f, 0.5f, 0.62f, 0.2f, 0.05f};
  const Tensor working = Tensor::from_vector(codes, Shape({1, 3, 3}));
  // ACESCCT keeps the log codes; the linear spaces decompress into their own primaries.
  EXPECT_EQ(media::hdr_exr_frames(working, HdrColorSpace::ACEScct).to_float_vector(), codes);
  const Tensor cg = media::hdr_exr_frames(working, HdrColorSpace::ACEScg);
  for (size_t i = 0; i < codes.size(); ++i)
    expect_close(cg.data<float>()[i], std::max(0.0, acescct_decompress(codes[i])), 2e-5, "acescg");
  EXPECT_EQ(media::hdr_exr_frames(working, HdrColorSpace::SrgbLinear).to_float_vector(),
            media::hdr_to_linear(working, HdrTransfer::ACEScct, Primaries::Rec709).to_float_vector());
}

// The reference's HLG signal in f64.
double hlg_of(double lin, double white_x, double k) {
  lin = std::max(lin, 0.0);
  const double x = lin <= 1.0 ? lin * white_x : 1.0 - (1.0 - white_x) * std::exp(-k * (lin - 1.0));
  const double s = x <= 1.0 / 12.0
                       ? std::sqrt(std::max(3.0 * x, 0.0))
                       : 0.17883277 * std::log(std::max(12.0 * x - 0.28466892, 1e-12)) + 0.55991073;
  return std::clamp(s, 0.0, 1.0);
}

TEST(Hlg, SignalMatchesTheReferenceFormulas) {
  const media::HlgMapping m = media::hlg_mapping();
  const double white_x = (std::exp((0.75 - 0.55991073) / 0.17883277) + 0.28466892) / 12.0;
  EXPECT_NEAR(m.white_x, white_x, 1e-7);
  EXPECT_NEAR(m.roll_k, white_x / (1.0 - white_x), 1e-6);
  std::vector<float> px;
  for (float v : sweep()) {
    px.insert(px.end(), {v, 0.5f * v, 0.1f + v});
  }
  px.insert(px.end(), {1.0f, 1.0f, 1.0f, std::numeric_limits<float>::quiet_NaN(), -INFINITY, 2.0f});
  const int64_t n = static_cast<int64_t>(px.size()) / 3;
  const Tensor sig = media::hlg_signal(Tensor::from_vector(px, Shape({n, 3})), m);
  for (int64_t p = 0; p < n; ++p) {
    for (int d = 0; d < 3; ++d) {
      double l = 0;
      for (int c = 0; c < 3; ++c) l += k709To2020[d][c] * px[static_cast<size_t>(3 * p + c)];
      // A NaN anywhere in the pixel spreads through the matrix; the reference maps NaN to 0.
      const double want = std::isnan(l) ? 0.0 : hlg_of(l, white_x, white_x / (1.0 - white_x));
      EXPECT_NEAR(sig.data<float>()[3 * p + d], want, 2e-5) << "pixel " << p << " channel " << d;
    }
  }
  // Diffuse white lands on signal 0.75.
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(sig.data<float>()[3 * (n - 2) + c], 0.75, 1e-5);
}

TEST(Hlg, TenBitBt2020Planes) {
  // [2, 4, 3]: white, black, and varied signals.
  std::vector<float> rgb = {1, 1, 1, 0, 0, 0, 0.3f, 0.6f, 0.9f, 0.25f, 0.5f, 0.125f,
                            1, 1, 1, 0, 0, 0, 0.8f, 0.1f, 0.4f, 0.7f,  0.7f, 0.2f};
  const Tensor frame = Tensor::from_vector(rgb, Shape({2, 4, 3}));
  std::vector<uint16_t> y(8), u(2), v(2);
  media::rgb_to_yuv420p10_bt2020(frame, y.data(), 4, u.data(), 2, v.data(), 2);
  EXPECT_EQ(y[0], 940);  // white: nominal peak
  EXPECT_EQ(y[1], 64);   // black
  const double kr = 0.2627, kg = 0.6780, kb = 0.0593;
  for (int i = 0; i < 8; ++i) {
    const float* p = rgb.data() + 3 * i;
    EXPECT_NEAR(y[static_cast<size_t>(i)],
                std::nearbyint((kr * p[0] + kg * p[1] + kb * p[2]) * 876 + 64), 1)
        << i;
  }
  for (int b = 0; b < 2; ++b) {
    double cb = 0, cr = 0;
    for (int dy = 0; dy < 2; ++dy)
      for (int dx = 0; dx < 2; ++dx) {
        const float* p = rgb.data() + 3 * (dy * 4 + 2 * b + dx);
        cb += (-kr / 1.8814) * p[0] + (-kg / 1.8814) * p[1] + 0.5 * p[2];
        cr += 0.5 * p[0] + (-kg / 1.4746) * p[1] + (-kb / 1.4746) * p[2];
      }
    EXPECT_NEAR(u[static_cast<size_t>(b)], std::nearbyint(cb / 4 * 896 + 512), 1) << b;
    EXPECT_NEAR(v[static_cast<size_t>(b)], std::nearbyint(cr / 4 * 896 + 512), 1) << b;
  }
}

TEST(Hlg, FrameRateFractionsAsPython) {
  // Fraction(x).limit_denominator(1000) in CPython.
  const std::vector<std::tuple<double, int64_t, int64_t>> cases = {{24.0, 24, 1},
                                                                   {23.976, 2997, 125},
                                                                   {29.97, 2997, 100},
                                                                   {30000.0 / 1001, 19001, 634},
                                                                   {24000.0 / 1001, 16999, 709},
                                                                   {12.5, 25, 2},
                                                                   {0.3, 3, 10},
                                                                   {59.94, 2997, 50},
                                                                   {0.007, 7, 1000}};
  for (const auto& [x, n, d] : cases) {
    const auto [gn, gd] = media::limit_denominator(x, 1000);
    EXPECT_EQ(gn, n) << x;
    EXPECT_EQ(gd, d) << x;
  }
}

TEST(Hlg, Mp4MasterIsTaggedBt2020Hlg10Bit) {
  LTX_REQUIRE_FFMPEG();
  test::TempDir dir;
  const std::string path = dir.file("master.mp4");
  const int64_t F = 5, H = 48, W = 64;
  Tensor frames = Tensor::empty({F, H, W, 3});
  float* p = frames.data<float>();
  for (int64_t i = 0; i < frames.numel(); ++i)
    p[i] = 0.02f * static_cast<float>(i % 211);  // up to 4.2
  media::Mp4Writer w(path, 30000.0 / 1001, media::hlg_mp4_options());
  w.write_frames(frames.slice(0, 0, 2));
  w.write_frames(frames.slice(0, 2, F));
  w.finish();
  const media::MediaInfo info = media::probe_media(path);
  ASSERT_EQ(info.streams.size(), 1u);
  const media::StreamInfo& v = info.streams[0];
  EXPECT_EQ(v.codec, "hevc");
  EXPECT_EQ(v.pixel_format, "yuv420p10le");
  EXPECT_EQ(v.color_primaries, "bt2020");
  EXPECT_EQ(v.color_transfer, "arib-std-b67");
  EXPECT_EQ(v.color_space, "bt2020nc");
  EXPECT_EQ(v.color_range, "tv");
  EXPECT_EQ(v.width, W);
  EXPECT_EQ(v.height, H);
  EXPECT_EQ(v.frames, F);
  EXPECT_NEAR(v.fps, 19001.0 / 634, 1e-9);
  // The SDR writer keeps its tags.
  media::write_mp4(dir.file("sdr.mp4"), frames.slice(0, 0, 1).to(DType::F32), 24.0);
  const media::StreamInfo s = media::probe_media(dir.file("sdr.mp4")).streams.at(0);
  EXPECT_EQ(s.codec, "h264");
  EXPECT_EQ(s.color_space, "bt709");
}

}  // namespace
}  // namespace ltx
