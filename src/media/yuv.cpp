#include "media/yuv.h"

#include <algorithm>

#include "core/dtype_bits.h"
#include "core/parallel.h"

namespace ltx::media {
namespace {

namespace bits = ltx::dtype_bits;

// torch's f32 constants of the BT.709 matrix (rows Y, Cb, Cr).
constexpr float kM[3][3] = {
    {0.2126f, 0.7152f, 0.0722f}, {-0.1146f, -0.3854f, 0.5f}, {0.5f, -0.4542f, -0.0458f}};
constexpr double kMd[3][3] = {
    {static_cast<double>(kM[0][0]), static_cast<double>(kM[0][1]), static_cast<double>(kM[0][2])},
    {static_cast<double>(kM[1][0]), static_cast<double>(kM[1][1]), static_cast<double>(kM[1][2])},
    {static_cast<double>(kM[2][0]), static_cast<double>(kM[2][1]), static_cast<double>(kM[2][2])}};

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

template <typename R>
typename R::T dot(const typename R::T* px, int row) {
  using T = typename R::T;
  if constexpr (sizeof(T) == sizeof(double)) {
    return px[0] * kMd[row][0] + px[1] * kMd[row][1] + px[2] * kMd[row][2];
  } else {
    // The reference casts the matrix to the frames' dtype too.
    return R::r(px[0] * R::r(kM[row][0]) + px[1] * R::r(kM[row][1]) + px[2] * R::r(kM[row][2]));
  }
}

template <typename R>
void convert_frame(const typename R::T* rgb, int64_t H, int64_t W, uint8_t* y, int64_t ys,
                   uint8_t* u, int64_t us, uint8_t* v, int64_t vs) {
  using T = typename R::T;
  // One task per pair of rows: the two luma rows and one chroma row.
  parallel_for(
      0, H / 2, std::max<int64_t>(1, 8192 / std::max<int64_t>(W, 1)), [&](int64_t b, int64_t e) {
        for (int64_t hr = b; hr < e; ++hr) {
          const T* row0 = rgb + (2 * hr) * W * 3;
          const T* row1 = row0 + W * 3;
          uint8_t* y0 = y + (2 * hr) * ys;
          uint8_t* y1 = y0 + ys;
          for (int64_t w = 0; w < W; ++w) {
            y0[w] = to_code(R::r(R::r(dot<R>(row0 + 3 * w, 0) * T(219)) + T(16)));
            y1[w] = to_code(R::r(R::r(dot<R>(row1 + 3 * w, 0) * T(219)) + T(16)));
          }
          for (int64_t wc = 0; wc < W / 2; ++wc) {
            const T* p00 = row0 + 6 * wc;
            const T* p01 = p00 + 3;
            const T* p10 = row1 + 6 * wc;
            const T* p11 = p10 + 3;
            for (int c = 1; c <= 2; ++c) {
              // avg_pool2d(2): summed row-major in the accumulate type, divided by 4.
              const T sum = ((dot<R>(p00, c) + dot<R>(p01, c)) + dot<R>(p10, c)) + dot<R>(p11, c);
              const T avg = R::r(sum / T(4));
              const uint8_t code = to_code(R::r(R::r(avg * T(224)) + T(128)));
              (c == 1 ? u + hr * us : v + hr * vs)[wc] = code;
            }
          }
        }
      });
}

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
      convert_frame<RoundF64>(c.data<double>(), H, W, y, y_stride, u, u_stride, v, v_stride);
      return;
    }
    case DType::F32: {
      const Tensor c = cpu.contiguous();
      convert_frame<RoundF32>(c.data<float>(), H, W, y, y_stride, u, u_stride, v, v_stride);
      return;
    }
    case DType::BF16: {
      const Tensor c = cpu.to(DType::F32).contiguous();  // exact
      convert_frame<RoundBF16>(c.data<float>(), H, W, y, y_stride, u, u_stride, v, v_stride);
      return;
    }
    case DType::F16: {
      const Tensor c = cpu.to(DType::F32).contiguous();  // exact
      convert_frame<RoundF16>(c.data<float>(), H, W, y, y_stride, u, u_stride, v, v_stride);
      return;
    }
    default:
      fail("rgb_to_yuv420_bt709: frames of dtype ", dtype_name(cpu.dtype()),
           " are not supported; use f32, bf16, f16 or f64");
  }
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
