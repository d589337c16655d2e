#include "media/yuv.h"

#include <algorithm>
#include <cmath>

#include "core/dtype_bits.h"
#include "core/parallel.h"

namespace ltx::media {
namespace {

namespace bits = ltx::dtype_bits;

// A YUV matrix (rows Y, Cb, Cr) as torch holds it: f32 constants, and their f64 values for f64
// frames.
struct YuvMatrix {
  float f[3][3];
  double d[3][3];
};
constexpr YuvMatrix make_matrix(const float (&m)[3][3]) {
  YuvMatrix out{};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) {
      out.f[r][c] = m[r][c];
      out.d[r][c] = static_cast<double>(m[r][c]);
    }
  return out;
}
constexpr float kBt709[3][3] = {
    {0.2126f, 0.7152f, 0.0722f}, {-0.1146f, -0.3854f, 0.5f}, {0.5f, -0.4542f, -0.0458f}};
// BT.2020 non-constant luminance: the reference derives the chroma rows from Kr, Kg, Kb in Python
// floats (f64) and casts the results to f32.
constexpr double kKr = 0.2627, kKg = 0.6780, kKb = 0.0593;
constexpr float kBt2020[3][3] = {
    {static_cast<float>(kKr), static_cast<float>(kKg), static_cast<float>(kKb)},
    {static_cast<float>(-kKr / 1.8814), static_cast<float>(-kKg / 1.8814), 0.5f},
    {0.5f, static_cast<float>(-kKg / 1.4746), static_cast<float>(-kKb / 1.4746)}};
constexpr YuvMatrix kMatBt709 = make_matrix(kBt709);
constexpr YuvMatrix kMatBt2020 = make_matrix(kBt2020);

// Rounding of one intermediate to the frames' dtype.
struct RoundF32 {
  using T = float;
  static float r(float x) { return x; }
};
struct RoundBF16 {
  using T = float;
  static float r(float x) { return bits::bf16_to_f32(bits::f32_to_bf16(x)); }
};
struct RoundF16 {
  using T = float;
  static float r(float x) { return bits::f16_to_f32(bits::f32_to_f16(x)); }
};
struct RoundF64 {
  using T = double;
  static double r(double x) { return x; }
};

// clamp(0, 255) then a truncating cast; NaN -> 0 (the cast of NaN is undefined in C++).
template <typename T>
uint8_t to_code(T x) {
  if (!(x >= T(0))) return 0;
  if (x >= T(255)) return 255;
  return static_cast<uint8_t>(x);
}

// 10-bit code: round half to even (torch.round), clamp to [0, 1023]; NaN -> 0.
uint16_t to_code10(float x) {
  if (!(x >= 0.0f)) return 0;
  const float r = std::nearbyint(x);
  return static_cast<uint16_t>(r >= 1023.0f ? 1023.0f : r);
}

template <typename R>
typename R::T dot(const YuvMatrix& m, const typename R::T* px, int row) {
  using T = typename R::T;
  if constexpr (sizeof(T) == sizeof(double)) {
    return px[0] * m.d[row][0] + px[1] * m.d[row][1] + px[2] * m.d[row][2];
  } else {
    // The reference casts the matrix to the frames' dtype too.
    return R::r(px[0] * R::r(m.f[row][0]) + px[1] * R::r(m.f[row][1]) + px[2] * R::r(m.f[row][2]));
  }
}

// Code levels of one bit depth, limited range: Y * y_scale + y_offset, C * c_scale + c_offset (each
// step rounded to the frames' dtype, as the reference's in-place mul_ / add_), then `code`.
template <typename T, typename Out>
struct Levels {
  T y_scale, y_offset, c_scale, c_offset;
  Out (*code)(T);
};

template <typename R, typename Out>
void convert_frame(const YuvMatrix& m, const Levels<typename R::T, Out>& lv,
                   const typename R::T* rgb, int64_t H, int64_t W, Out* y, int64_t ys, Out* u,
                   int64_t us, Out* v, int64_t vs) {
  using T = typename R::T;
  // One task per pair of rows: the two luma rows and one chroma row.
  parallel_for(
      0, H / 2, std::max<int64_t>(1, 8192 / std::max<int64_t>(W, 1)), [&](int64_t b, int64_t e) {
        for (int64_t hr = b; hr < e; ++hr) {
          const T* row0 = rgb + (2 * hr) * W * 3;
          const T* row1 = row0 + W * 3;
          Out* y0 = y + (2 * hr) * ys;
          Out* y1 = y0 + ys;
          for (int64_t w = 0; w < W; ++w) {
            y0[w] = lv.code(R::r(R::r(dot<R>(m, row0 + 3 * w, 0) * lv.y_scale) + lv.y_offset));
            y1[w] = lv.code(R::r(R::r(dot<R>(m, row1 + 3 * w, 0) * lv.y_scale) + lv.y_offset));
          }
          for (int64_t wc = 0; wc < W / 2; ++wc) {
            const T* p00 = row0 + 6 * wc;
            const T* p01 = p00 + 3;
            const T* p10 = row1 + 6 * wc;
            const T* p11 = p10 + 3;
            for (int c = 1; c <= 2; ++c) {
              // avg_pool2d(2): summed row-major in the accumulate type, divided by 4.
              const T sum =
                  ((dot<R>(m, p00, c) + dot<R>(m, p01, c)) + dot<R>(m, p10, c)) + dot<R>(m, p11, c);
              const T avg = R::r(sum / T(4));
              const Out code = lv.code(R::r(R::r(avg * lv.c_scale) + lv.c_offset));
              (c == 1 ? u + hr * us : v + hr * vs)[wc] = code;
            }
          }
        }
      });
}

// 8-bit limited range: Y * 219 + 16, C * 224 + 128, clamp and truncate.
template <typename T>
constexpr Levels<T, uint8_t> kLevels8{T(219), T(16), T(224), T(128), &to_code<T>};
// 10-bit limited range: the 8-bit levels * 4, rounded half to even.
constexpr Levels<float, uint16_t> kLevels10{876.0f, 64.0f, 896.0f, 512.0f, &to_code10};

void check_frames(const Tensor& t, const char* who) {
  LTX_CHECK(dtype_is_floating(t.dtype()), who,
            ": frames must be a floating dtype (values in "
            "[0, 1]); got ",
            t.describe());
  LTX_CHECK(t.dim() >= 1 && t.size(-1) == 3, who,
            ": frames must have 3 channels last "
            "([F, H, W, 3] or [H, W, 3]); got ",
            t.describe());
}

}  // namespace

void rgb_to_yuv420_bt709(const Tensor& frame, uint8_t* y, int64_t y_stride, uint8_t* u,
                         int64_t u_stride, uint8_t* v, int64_t v_stride) {
  check_frames(frame, "rgb_to_yuv420_bt709");
  LTX_CHECK(frame.dim() == 3, "rgb_to_yuv420_bt709: expected one frame [H, W, 3]; got ",
            frame.describe());
  const int64_t H = frame.size(0), W = frame.size(1);
  LTX_CHECK(H % 2 == 0 && W % 2 == 0,
            "rgb_to_yuv420_bt709: height and width must be even for "
            "4:2:0 chroma; got ",
            H, "x", W);
  const Tensor cpu = frame.device().is_cpu() ? frame : frame.to(Device::cpu());
  switch (cpu.dtype()) {
    case DType::F64: {
      const Tensor c = cpu.contiguous();
      convert_frame<RoundF64>(kMatBt709, kLevels8<double>, c.data<double>(), H, W, y, y_stride, u,
                              u_stride, v, v_stride);
      return;
    }
    case DType::F32: {
      const Tensor c = cpu.contiguous();
      convert_frame<RoundF32>(kMatBt709, kLevels8<float>, c.data<float>(), H, W, y, y_stride, u,
                              u_stride, v, v_stride);
      return;
    }
    case DType::BF16: {
      const Tensor c = cpu.to(DType::F32).contiguous();  // exact
      convert_frame<RoundBF16>(kMatBt709, kLevels8<float>, c.data<float>(), H, W, y, y_stride, u,
                               u_stride, v, v_stride);
      return;
    }
    case DType::F16: {
      const Tensor c = cpu.to(DType::F32).contiguous();  // exact
      convert_frame<RoundF16>(kMatBt709, kLevels8<float>, c.data<float>(), H, W, y, y_stride, u,
                              u_stride, v, v_stride);
      return;
    }
    default:
      fail("rgb_to_yuv420_bt709: frames of dtype ", dtype_name(cpu.dtype()),
           " are not supported; use f32, bf16, f16 or f64");
  }
}

void rgb_to_yuv420p10_bt2020(const Tensor& frame, uint16_t* y, int64_t y_stride, uint16_t* u,
                             int64_t u_stride, uint16_t* v, int64_t v_stride) {
  LTX_CHECK(
      frame.defined() && frame.dim() == 3 && frame.size(2) == 3 && frame.dtype() == DType::F32,
      "rgb_to_yuv420p10_bt2020: expected one f32 frame [H, W, 3]; got ",
      frame.defined() ? frame.describe() : std::string("an undefined tensor"));
  const int64_t H = frame.size(0), W = frame.size(1);
  LTX_CHECK(H % 2 == 0 && W % 2 == 0,
            "rgb_to_yuv420p10_bt2020: height and width must be even for 4:2:0 chroma; got ", H, "x",
            W);
  const Tensor c = frame.to(Device::cpu()).contiguous();
  convert_frame<RoundF32>(kMatBt2020, kLevels10, c.data<float>(), H, W, y, y_stride, u, u_stride, v,
                          v_stride);
}

Yuv420Frames rgb_to_yuv420_bt709(const Tensor& frames) {
  check_frames(frames, "rgb_to_yuv420_bt709");
  LTX_CHECK(frames.dim() == 3 || frames.dim() == 4,
            "rgb_to_yuv420_bt709: expected [F, H, W, 3] or [H, W, 3]; got ", frames.describe());
  const Tensor f4 = frames.dim() == 3 ? frames.unsqueeze(0) : frames;
  const int64_t F = f4.size(0), H = f4.size(1), W = f4.size(2);
  LTX_CHECK(H % 2 == 0 && W % 2 == 0,
            "rgb_to_yuv420_bt709: height and width must be even for "
            "4:2:0 chroma; got ",
            H, "x", W);
  Yuv420Frames out{Tensor::empty({F, H, W}, DType::U8), Tensor::empty({F, H / 2, W / 2}, DType::U8),
                   Tensor::empty({F, H / 2, W / 2}, DType::U8)};
  for (int64_t f = 0; f < F; ++f) {
    rgb_to_yuv420_bt709(f4.select(0, f), out.y.data<uint8_t>() + f * H * W, W,
                        out.u.data<uint8_t>() + f * (H / 2) * (W / 2), W / 2,
                        out.v.data<uint8_t>() + f * (H / 2) * (W / 2), W / 2);
  }
  return out;
}

Tensor rgb_to_uint8(const Tensor& frames) {
  check_frames(frames, "rgb_to_uint8");
  const Tensor cpu = frames.device().is_cpu() ? frames : frames.to(Device::cpu());
  const DType dt = cpu.dtype();
  LTX_CHECK(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16 || dt == DType::F64,
            "rgb_to_uint8: frames of dtype ", dtype_name(dt),
            " are not supported; use f32, bf16, f16 or f64");
  const Tensor src = (dt == DType::F64 ? cpu : cpu.to(DType::F32)).contiguous();
  Tensor out = Tensor::empty(cpu.shape(), DType::U8);
  uint8_t* o = out.data<uint8_t>();
  const int64_t n = src.numel();
  // std::clamp passes NaN through; to_code maps it to 0.
  if (dt == DType::F64) {
    const double* p = src.data<double>();
    parallel_for(0, n, 1 << 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = to_code(std::clamp(p[i], 0.0, 1.0) * 255.0);
    });
    return out;
  }
  const float* p = src.data<float>();
  parallel_for(0, n, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float s = std::clamp(p[i], 0.f, 1.f) * 255.f;
      if (dt == DType::BF16) s = RoundBF16::r(s);
      if (dt == DType::F16) s = RoundF16::r(s);
      o[i] = to_code(s);
    }
  });
  return out;
}

}  // namespace ltx::media
