// Conditioning-image preparation: resize_and_center_crop against a double reference, the
// normalisation, the CRF re-encode and the whole load path.
#include "media/preprocess.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "media/image.h"
#include "media_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

// torch bilinear, align_corners=False, no antialias, size given: src = (dst + 0.5) * in/out - 0.5
// clamped at 0; neighbours i0 = floor(src), i1 = min(i0 + 1, in - 1).
std::vector<double> bilinear_ref(const std::vector<double>& x, int64_t H, int64_t W, int64_t C,
                                 int64_t oh, int64_t ow) {
  std::vector<double> y(static_cast<size_t>(oh * ow * C));
  auto taps = [](int64_t o, int64_t in, int64_t out, int64_t* i0, int64_t* i1, double* l) {
    double s = (o + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
    if (s < 0) s = 0;
    *i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(s)), in - 1);
    *i1 = std::min<int64_t>(*i0 + 1, in - 1);
    *l = s - static_cast<double>(*i0);
  };
  for (int64_t h = 0; h < oh; ++h)
    for (int64_t w = 0; w < ow; ++w) {
      int64_t h0, h1, w0, w1;
      double lh, lw;
      taps(h, H, oh, &h0, &h1, &lh);
      taps(w, W, ow, &w0, &w1, &lw);
      for (int64_t c = 0; c < C; ++c) {
        auto at = [&](int64_t r, int64_t q) { return x[static_cast<size_t>((r * W + q) * C + c)]; };
        y[static_cast<size_t>((h * ow + w) * C + c)] =
            (1 - lh) * ((1 - lw) * at(h0, w0) + lw * at(h0, w1)) +
            lh * ((1 - lw) * at(h1, w0) + lw * at(h1, w1));
      }
    }
  return y;
}

// [H, W, 3] -> expected [3, h, w] values of resize_and_center_crop, in double.
std::vector<double> resize_crop_ref(const std::vector<double>& x, int64_t H, int64_t W, int64_t h,
                                    int64_t w) {
  const double scale = std::max(static_cast<double>(h) / H, static_cast<double>(w) / W);
  const int64_t nh = static_cast<int64_t>(std::ceil(H * scale));
  const int64_t nw = static_cast<int64_t>(std::ceil(W * scale));
  const auto r = bilinear_ref(x, H, W, 3, nh, nw);
  const int64_t top = (nh - h) / 2, left = (nw - w) / 2;
  std::vector<double> out;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        out.push_back(r[static_cast<size_t>(((top + i) * nw + left + j) * 3 + c)]);
  return out;
}

TEST(Resize, CenterCropMatchesDoubleReference) {
  struct Case {
    int64_t H, W, h, w;
  };
  // Upscale with a 1-pixel ceil surplus, downscale with a large crop, odd sizes, identity.
  for (const Case& c : {Case{7, 5, 16, 12}, Case{100, 80, 32, 48}, Case{33, 129, 7, 3},
                        Case{8, 8, 8, 8}, Case{1, 3, 4, 4}}) {
    const Tensor img =
        test::random_tensor({c.H, c.W, 3}, static_cast<uint64_t>(c.H * 1000 + c.W), 0.f, 255.f);
    const Tensor got = media::resize_and_center_crop(test::non_contiguous_copy(img), c.h, c.w);
    ASSERT_EQ(got.shape(), (Shape{1, 3, 1, c.h, c.w})) << c.H << "x" << c.W;
    ASSERT_EQ(got.dtype(), DType::F32);
    const auto ref = resize_crop_ref(img.to_double_vector(), c.H, c.W, c.h, c.w);
    const auto g = got.to_double_vector();
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(g[i] - ref[i]));
    EXPECT_LT(worst, 2e-3) << c.H << "x" << c.W << " -> " << c.h << "x" << c.w;
  }
}

TEST(Resize, FramesAndU8Input) {
  const Tensor u8 = test::pattern_u8(10, 14, 3, 9);
  const Tensor frames = Tensor::empty({2, 10, 14, 3}, DType::U8);
  frames.select(0, 0).copy_from(u8);
  frames.select(0, 1).copy_from(test::pattern_u8(10, 14, 3, 10));
  const Tensor got = media::resize_and_center_crop(frames, 6, 6);
  ASSERT_EQ(got.shape(), (Shape{1, 3, 2, 6, 6}));
  const Tensor one = media::resize_and_center_crop(u8, 6, 6);
  EXPECT_EQ(test::max_abs_diff(got.narrow(2, 0, 1), one), 0);
  test::expect_error_containing([&] { media::resize_and_center_crop(u8, 0, 4); }, {"positive"});
  test::expect_error_containing(
      [&] {
        media::resize_and_center_crop(Tensor::zeros({4, 4, 4}), 2, 2);
      },
      {"[H, W, 3]"});
}

// [H, W, 3] -> expected [3, h, w] values of resize_and_reflect_pad, in double (torch's reflect
// pad mirrors without repeating the edge; replicate repeats it).
std::vector<double> resize_pad_ref(const std::vector<double>& x, int64_t H, int64_t W, int64_t h,
                                   int64_t w) {
  int64_t nh = H, nw = W;
  std::vector<double> r = x;
  if (h < H || w < W) {
    const double scale = std::min(static_cast<double>(h) / H, static_cast<double>(w) / W);
    nh = static_cast<int64_t>(std::nearbyint(H * scale));
    nw = static_cast<int64_t>(std::nearbyint(W * scale));
    r = bilinear_ref(x, H, W, 3, nh, nw);
  }
  const bool reflect = h - nh < nh && w - nw < nw;
  auto src = [&](int64_t i, int64_t n) {
    if (i < n) return i;
    return reflect ? 2 * (n - 1) - i : n - 1;
  };
  std::vector<double> out;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        out.push_back(r[static_cast<size_t>((src(i, nh) * nw + src(j, nw)) * 3 + c)]);
  return out;
}

TEST(Resize, ReflectPadMatchesDoubleReference) {
  struct Case {
    int64_t H, W, h, w;
  };
  // No resize + reflect (source fits), downscale + reflect, round(2.5) = 2 (half to even) with a
  // replicate pad (the pad exceeds the resized size), exact fit.
  for (const Case& c : {Case{5, 7, 8, 12}, Case{72, 176, 64, 96}, Case{5, 10, 5, 5},
                        Case{6, 4, 6, 4}, Case{3, 3, 9, 4}}) {
    const Tensor img =
        test::random_tensor({c.H, c.W, 3}, static_cast<uint64_t>(c.H * 1000 + c.W), 0.f, 255.f);
    const Tensor got = media::resize_and_reflect_pad(test::non_contiguous_copy(img), c.h, c.w);
    ASSERT_EQ(got.shape(), (Shape{1, 3, 1, c.h, c.w})) << c.H << "x" << c.W;
    const auto ref = resize_pad_ref(img.to_double_vector(), c.H, c.W, c.h, c.w);
    const auto g = got.to_double_vector();
    double worst = 0;
    for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(g[i] - ref[i]));
    // torch (and ops::interpolate) place the taps with f32 coordinates: ~1e-5 of the 255 range.
    EXPECT_LT(worst, 5e-3) << c.H << "x" << c.W << " -> " << c.h << "x" << c.w;
  }
  // Without a resize the pixels pass unchanged.
  const Tensor u8 = test::pattern_u8(4, 6, 3, 3);
  const Tensor same = media::resize_and_reflect_pad(u8, 4, 6);
  EXPECT_EQ(test::max_abs_diff(same, media::resize_and_center_crop(u8, 4, 6)), 0);
}

TEST(Normalize, MapsByteRangeToUnitRange) {
  const Tensor x = Tensor::from_vector(std::vector<float>{0.f, 127.5f, 255.f, 63.75f}, {4});
  const auto y = media::normalize_to_unit_range(x).to_double_vector();
  EXPECT_EQ(y[0], -1.0);
  EXPECT_NEAR(y[1], 0.0, 1e-7);
  EXPECT_NEAR(y[2], 1.0, 1e-7);
  EXPECT_NEAR(y[3], -0.5, 1e-7);
  EXPECT_EQ(media::normalize_to_unit_range(x, DType::BF16).dtype(), DType::BF16);
}

double psnr(const Tensor& a, const Tensor& b) {
  const auto va = a.to_double_vector(), vb = b.to_double_vector();
  double se = 0;
  for (size_t i = 0; i < va.size(); ++i) se += (va[i] - vb[i]) * (va[i] - vb[i]);
  const double mse = se / static_cast<double>(va.size());
  return mse == 0 ? 99 : 10 * std::log10(255.0 * 255.0 / mse);
}

// A smooth image (gradients plus a soft blob), 9 x 7 so that the even crop shows.
Tensor smooth_image(int64_t h, int64_t w) {
  Tensor t = Tensor::empty({h, w, 3}, DType::U8);
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < w; ++j) {
      uint8_t* p = t.data<uint8_t>() + (i * w + j) * 3;
      p[0] = static_cast<uint8_t>(40 + 160 * i / std::max<int64_t>(h - 1, 1));
      p[1] = static_cast<uint8_t>(200 - 150 * j / std::max<int64_t>(w - 1, 1));
      p[2] = static_cast<uint8_t>(120 + 60 * std::sin(0.08 * static_cast<double>(i + j)));
    }
  return t;
}

TEST(CrfRecompress, SkippedForCrfZeroAndTinyImages) {
  const Tensor img = smooth_image(9, 7);
  EXPECT_EQ(media::crf_recompress(img, 0).raw_data(), img.raw_data());
  const Tensor row = smooth_image(1, 16);
  EXPECT_EQ(media::crf_recompress(row, 33).raw_data(), row.raw_data());
  test::expect_error_containing([&] { media::crf_recompress(img, -1); }, {"crf"});
  test::expect_error_containing([&] { media::crf_recompress(img, 52); }, {"crf"});
  test::expect_error_containing([&] { media::crf_recompress(img.to(DType::F32), 20); }, {"u8"});
  if (!media::ffmpeg_available())
    test::expect_error_containing([&] { media::crf_recompress(img, 20); },
                                  {"no FFmpeg support", "-DLTX_FFMPEG=ON"});
}

TEST(CrfRecompress, EvenCropAndH264Fidelity) {
  LTX_REQUIRE_FFMPEG();
  const Tensor img = smooth_image(37, 51);
  const Tensor cropped = img.narrow(0, 0, 36).narrow(1, 0, 50);
  const Tensor a = media::crf_recompress(img, 20, 1);
  ASSERT_EQ(a.shape(), (Shape{36, 50, 3}));
  ASSERT_EQ(a.dtype(), DType::U8);
  EXPECT_GT(psnr(a, cropped), 30);
  EXPECT_LT(psnr(a, cropped), 99);  // it did change the pixels
  // Deterministic for a fixed thread count; a harsher crf loses more.
  EXPECT_EQ(test::max_abs_diff(media::crf_recompress(img, 20, 1), a), 0);
  EXPECT_LT(psnr(media::crf_recompress(img, 45, 1), cropped), psnr(a, cropped));
}

TEST(LoadImageConditioning, ComposesTheSteps) {
  LTX_REQUIRE_IMAGE_IO();
  test::TempDir dir;
  const Tensor img = smooth_image(40, 60);
  media::write_png(dir.file("c.png"), img);
  const Tensor got = media::load_image_conditioning(dir.file("c.png"), 32, 64, 0);
  ASSERT_EQ(got.shape(), (Shape{1, 3, 1, 32, 64}));
  const Tensor expect = media::normalize_to_unit_range(media::resize_and_center_crop(img, 32, 64));
  EXPECT_EQ(test::max_abs_diff(got, expect), 0);
  const auto v = got.to_double_vector();
  for (double x : v) ASSERT_TRUE(x >= -1 && x <= 1) << x;
  const Tensor bf = media::load_image_conditioning(dir.file("c.png"), 32, 64, 0, DType::BF16);
  EXPECT_EQ(bf.dtype(), DType::BF16);
  if (media::ffmpeg_available()) {
    const Tensor crf = media::load_image_conditioning(dir.file("c.png"), 32, 64, 33);
    EXPECT_GT(test::max_abs_diff(crf, got), 0);
    EXPECT_LT(test::max_abs_diff(crf, got), 0.5);
  }
}

// load_exr_conditioning_hdr's steps after the read: the fit in linear light, the working space
// (ACEScct from the space's primaries, or ACEScct codes clamped), then x * 2 - 1.
TEST(PrepareHdrFrames, ComposesFitWorkingSpaceAndRange) {
  Tensor linear = Tensor::empty({2, 6, 10, 3}, DType::F32);
  for (int64_t i = 0; i < linear.numel(); ++i)
    linear.data<float>()[i] =
        0.02f * static_cast<float>(i % 37) + (i % 19 == 0 ? 30.0f : 0.0f) - (i % 23 == 0 ? 0.1f : 0.0f);
  for (const auto mode : {media::ResizeMode::CenterCrop, media::ResizeMode::ReflectPad}) {
    const Tensor fitted = mode == media::ResizeMode::CenterCrop ? media::resize_and_center_crop(linear, 4, 4)
                                                                : media::resize_and_reflect_pad(linear, 4, 8);
    const int64_t w = mode == media::ResizeMode::CenterCrop ? 4 : 8;
    for (const auto cs :
         {media::HdrColorSpace::SrgbLinear, media::HdrColorSpace::ACEScg, media::HdrColorSpace::ACEScct}) {
      const Tensor got = media::prepare_hdr_frames(linear, 4, w, cs, mode);
      ASSERT_EQ(got.shape(), (Shape{1, 3, 2, 4, w}));
      const Tensor cl = fitted.permute({0, 2, 3, 4, 1}).contiguous();  // [1, F, h, w, 3]
      const Tensor working = cs == media::HdrColorSpace::ACEScct
                                 ? cl
                                 : media::hdr_to_working_space(cl, media::HdrTransfer::ACEScct,
                                                               media::hdr_source_primaries(cs));
      const Tensor want = working.permute({0, 4, 1, 2, 3}).contiguous();
      for (int64_t i = 0; i < got.numel(); ++i) {
        const float x = std::clamp(want.data<float>()[i], 0.0f, 1.0f);
        ASSERT_EQ(got.data<float>()[i], x * 2.0f - 1.0f) << media::hdr_color_space_name(cs) << " " << i;
      }
    }
  }
  // The pipeline dtype is applied last; u8 pixels are not EXR.
  EXPECT_EQ(media::prepare_hdr_frames(linear, 4, 4, media::HdrColorSpace::ACEScg, media::ResizeMode::CenterCrop,
                                      DType::BF16).dtype(), DType::BF16);
  test::expect_error_containing(
      [] { media::prepare_hdr_frames(Tensor::zeros({4, 4, 3}, DType::U8), 4, 4, media::HdrColorSpace::ACEScg,
                                     media::ResizeMode::CenterCrop); },
      {"prepare_hdr_frames", "floating (EXR) pixels"});
}

}  // namespace
}  // namespace ltx
