#pragma once
// One-element conversion between any two DTypes, usable from host code and CUDA kernels. This is
// THE definition of ltx's conversion semantics: convert_dense (CPU) and the CUDA copy kernels both
// call convert_element, so the two backends agree bit for bit.
//   - same dtype: the bytes are copied (NaN payloads kept); bf16 -> f32 is the exact bit shift;
//   - every other source is read either as double (floats) or as int64 (integers and bool);
//     float <-> double widening/narrowing of NaNs follows x86-64 SSE (quiet bit set, payload kept
//     or truncated) explicitly, so that GPUs, which may canonicalise NaNs, produce the same bits;
//   - f16/bf16/f8 targets are built from float (a double source is rounded to float first, as
//     c10's constructors that take a float do), integer sources are converted to float directly;
//   - float -> integer truncates toward zero; NaN and |x| >= 9.2e18 give 0 (C++ leaves those
//     undefined); then the int64 is narrowed modulo 2^bits;
//   - anything -> bool is (x != 0), NaN counts as nonzero.
#include <cstdint>

#include "core/dtype.h"
#include "core/dtype_bits.h"

namespace ltx::dtype_bits {

LTX_HOST_DEVICE constexpr bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8E4M3FN ||
         t == DType::F8E5M2 || t == DType::F64;
}

LTX_HOST_DEVICE constexpr int element_bytes(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64: return 8;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    default: return 1;
  }
}

LTX_HOST_DEVICE inline uint64_t f64_bits(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(d));
#else
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
#endif
}
LTX_HOST_DEVICE inline double f64_from_bits(uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  double d;
  std::memcpy(&d, &u, 8);
  return d;
#endif
}

// float -> double, exact; a NaN keeps sign and payload and becomes quiet (as cvtss2sd does).
LTX_HOST_DEVICE inline double f32_to_f64(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    const uint64_t sign = static_cast<uint64_t>(u & 0x80000000u) << 32;
    const uint64_t mant = static_cast<uint64_t>((u & 0x007FFFFFu) | 0x00400000u) << 29;
    return f64_from_bits(sign | 0x7FF0000000000000ull | mant);
  }
  return static_cast<double>(f);
}

// double -> float, round to nearest even; a NaN keeps sign and the top payload bits and becomes
// quiet (as cvtsd2ss does).
LTX_HOST_DEVICE inline float f64_to_f32(double d) {
  const uint64_t b = f64_bits(d);
  if ((b & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull) {
    const uint32_t sign = static_cast<uint32_t>(b >> 32) & 0x80000000u;
    const uint32_t mant = static_cast<uint32_t>(b >> 29) & 0x007FFFFFu;
    return f32_from_bits(sign | 0x7FC00000u | mant);
  }
  return static_cast<float>(d);
}

// f64_to_f32(f32_to_f64(f)): sets the quiet bit of a NaN, identity otherwise.
LTX_HOST_DEVICE inline float quiet_f32(float f) {
  const uint32_t u = f32_bits(f);
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? f32_from_bits(u | 0x00400000u) : f;
}

// Reads the element at `p` as double (exact for every float type and for |ints| < 2^53).
LTX_HOST_DEVICE inline double load_float(const void* p, DType st) {
  switch (st) {
    case DType::F32: return f32_to_f64(*static_cast<const float*>(p));
    case DType::F64: return *static_cast<const double*>(p);
    case DType::F16: return f32_to_f64(f16_to_f32(*static_cast<const uint16_t*>(p)));
    case DType::BF16: return f32_to_f64(bf16_to_f32(*static_cast<const uint16_t*>(p)));
    case DType::F8E4M3FN: return f32_to_f64(f8e4m3fn_to_f32(*static_cast<const uint8_t*>(p)));
    case DType::F8E5M2: return f32_to_f64(f8e5m2_to_f32(*static_cast<const uint8_t*>(p)));
    case DType::I8: return *static_cast<const int8_t*>(p);
    case DType::U8: return *static_cast<const uint8_t*>(p);
    case DType::I32: return *static_cast<const int32_t*>(p);
    case DType::I64: return static_cast<double>(*static_cast<const int64_t*>(p));
    case DType::Bool: return *static_cast<const uint8_t*>(p) != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

// Reads the element at `p` as int64 (floats truncated toward zero; NaN / out of range -> 0).
LTX_HOST_DEVICE inline int64_t load_int(const void* p, DType st) {
  switch (st) {
    case DType::I8: return *static_cast<const int8_t*>(p);
    case DType::U8: return *static_cast<const uint8_t*>(p);
    case DType::I32: return *static_cast<const int32_t*>(p);
    case DType::I64: return *static_cast<const int64_t*>(p);
    case DType::Bool: return *static_cast<const uint8_t*>(p) != 0;
    default: {
      const double d = load_float(p, st);
      if (!(d > -9.2e18 && d < 9.2e18)) return 0;
      return static_cast<int64_t>(d);
    }
  }
}

// The element as float: floats via double, integers directly (one rounding either way).
LTX_HOST_DEVICE inline float load_as_f32(const void* p, DType st) {
  return is_floating(st) ? f64_to_f32(load_float(p, st)) : static_cast<float>(load_int(p, st));
}

LTX_HOST_DEVICE inline void convert_element(const void* s, DType st, void* d, DType dt) {
  if (st == dt) {
    const auto* sb = static_cast<const unsigned char*>(s);
    auto* db = static_cast<unsigned char*>(d);
    for (int i = 0; i < element_bytes(st); ++i) db[i] = sb[i];
    return;
  }
  if (st == DType::BF16 && dt == DType::F32) {
    *static_cast<float*>(d) = bf16_to_f32(*static_cast<const uint16_t*>(s));
    return;
  }
  switch (dt) {
    case DType::F32: *static_cast<float*>(d) = load_as_f32(s, st); return;
    case DType::F64:
      *static_cast<double*>(d) =
          is_floating(st) ? load_float(s, st) : static_cast<double>(load_int(s, st));
      return;
    case DType::F16: *static_cast<uint16_t*>(d) = f32_to_f16(load_as_f32(s, st)); return;
    case DType::BF16: *static_cast<uint16_t*>(d) = f32_to_bf16(load_as_f32(s, st)); return;
    case DType::F8E4M3FN: *static_cast<uint8_t*>(d) = f32_to_f8e4m3fn(load_as_f32(s, st)); return;
    case DType::F8E5M2: *static_cast<uint8_t*>(d) = f32_to_f8e5m2(load_as_f32(s, st)); return;
    case DType::I8: *static_cast<int8_t*>(d) = static_cast<int8_t>(load_int(s, st)); return;
    case DType::U8: *static_cast<uint8_t*>(d) = static_cast<uint8_t>(load_int(s, st)); return;
    case DType::I32: *static_cast<int32_t*>(d) = static_cast<int32_t>(load_int(s, st)); return;
    case DType::I64: *static_cast<int64_t*>(d) = load_int(s, st); return;
    case DType::Bool: {
      const bool nz = is_floating(st) ? load_float(s, st) != 0.0 : load_int(s, st) != 0;
      *static_cast<uint8_t*>(d) = nz ? 1 : 0;
      return;
    }
  }
}

}  // namespace ltx::dtype_bits
