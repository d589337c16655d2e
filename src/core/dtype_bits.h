#pragma once
// Bit-exact scalar float conversions, usable from host code and from CUDA kernels
// (LTX_HOST_DEVICE), so that the CPU conversion (core/dtype.cpp) and the CUDA copy kernels
// (backend/cuda/copy.cu) run the very same code. The rounding rules are PyTorch's (c10): see
// core/dtype.h.
//
// The tricks below let the FPU do the rounding (adding a power-of-two bias, scaling by powers of
// two); each of those float operations must round on its own. add_rn/mul_rn make that explicit on
// the device, where nvcc would otherwise be free to contract a multiply and an add into one FMA.
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LTX_HOST_DEVICE __host__ __device__
#else
#define LTX_HOST_DEVICE
#endif

namespace ltx::dtype_bits {

LTX_HOST_DEVICE inline uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

LTX_HOST_DEVICE inline float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// One correctly rounded (to nearest even) add / multiply / divide of floats or doubles, never
// fused with a neighbour (the float64 ops use the double ones).
template <typename T>
LTX_HOST_DEVICE inline T add_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8) {
    return __dadd_rn(a, b);
  } else {
    return __fadd_rn(a, b);
  }
#else
  return a + b;
#endif
}
template <typename T>
LTX_HOST_DEVICE inline T mul_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8) {
    return __dmul_rn(a, b);
  } else {
    return __fmul_rn(a, b);
  }
#else
  return a * b;
#endif
}
template <typename T>
LTX_HOST_DEVICE inline T div_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 8) {
    return __ddiv_rn(a, b);
  } else {
    return __fdiv_rn(a, b);
  }
#else
  return a / b;
#endif
}

LTX_HOST_DEVICE inline uint16_t f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // One cvt instead of ~8 integer instructions (every bf16 store of every kernel goes through
  // here). The hardware rounds to nearest even like the code below; only NaN differs (it keeps
  // the sign), so NaN is mapped to the same canonical value.
  if (f != f) return 0x7FC0;
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  uint32_t u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;  // NaN -> canonical quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);                       // round to nearest even
  return static_cast<uint16_t>(u >> 16);
#endif
}
LTX_HOST_DEVICE inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

// IEEE half from float, round to nearest even. Adding a power-of-two bias lets the FPU do the
// rounding of the dropped mantissa bits; overflow lands on inf, NaN becomes 0x7E00 (sign kept).
LTX_HOST_DEVICE inline uint16_t f32_to_f16(float f) {
  const float scale_to_inf = f32_from_bits(0x77800000u);   // 2^112
  const float scale_to_zero = f32_from_bits(0x08800000u);  // 2^-110
  const uint32_t w = f32_bits(f);
  const float abs_f = f32_from_bits(w & 0x7FFFFFFFu);
  float base = mul_rn(mul_rn(abs_f, scale_to_inf), scale_to_zero);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = add_rn(f32_from_bits((bias >> 1) + 0x07800000u), base);
  const uint32_t bits = f32_bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

LTX_HOST_DEVICE inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  // Zero or subnormal: value = mant * 2^-24, exact in float.
  const float v = mul_rn(static_cast<float>(mant), f32_from_bits(0x33800000u));  // 2^-24
  return f32_from_bits(sign | f32_bits(v));
}

LTX_HOST_DEVICE inline uint8_t f32_to_f8e4m3fn(float f) {
  constexpr uint32_t kNanThreshold = 1087u << 20;  // 480.0f: first value that rounds past 448
  constexpr uint32_t kDenormMask = 141u << 23;     // 2^14 as float bits
  uint32_t bits = f32_bits(f);
  const uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint8_t result;
  if (bits >= kNanThreshold) {
    result = 0x7F;  // NaN: e4m3fn has no infinity
  } else if (bits < (121u << 23)) {
    // Below 2^-6 (smallest normal): let the FPU round into the subnormal grid.
    bits = f32_bits(add_rn(f32_from_bits(bits), f32_from_bits(kDenormMask)));
    result = static_cast<uint8_t>(bits - kDenormMask);
  } else {
    const uint32_t mant_odd = (bits >> 20) & 1u;
    bits += (static_cast<uint32_t>(7 - 127) << 23) + 0x7FFFFu;
    bits += mant_odd;
    result = static_cast<uint8_t>(bits >> 20);
  }
  return static_cast<uint8_t>(result | (sign >> 24));
}

LTX_HOST_DEVICE inline float f8e4m3fn_to_f32(uint8_t v) {
  const uint32_t sign = (static_cast<uint32_t>(v) & 0x80u) << 24;
  const uint32_t exp = (v >> 3) & 0xFu;
  const uint32_t mant = v & 0x7u;
  if (exp == 0xF && mant == 0x7) return f32_from_bits(sign | 0x7FF00000u);  // NaN (torch's bits)
  if (exp != 0) return f32_from_bits(sign | ((exp + 120u) << 23) | (mant << 20));
  const float m = mul_rn(static_cast<float>(mant), f32_from_bits(0x3B000000u));  // mant * 2^-9
  return f32_from_bits(sign | f32_bits(m));
}

LTX_HOST_DEVICE inline uint8_t f32_to_f8e5m2(float f) {
  constexpr uint32_t kInfBits = 255u << 23;
  constexpr uint32_t kOverflow = 143u << 23;    // 65536.0f
  constexpr uint32_t kDenormMask = 134u << 23;  // 2^7
  uint32_t bits = f32_bits(f);
  const uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  uint8_t result;
  if (bits >= kOverflow) {
    result = bits > kInfBits ? 0x7F : 0x7C;  // NaN or inf
  } else if (bits < (113u << 23)) {
    bits = f32_bits(add_rn(f32_from_bits(bits), f32_from_bits(kDenormMask)));
    result = static_cast<uint8_t>(bits - kDenormMask);
  } else {
    const uint32_t mant_odd = (bits >> 21) & 1u;
    bits += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFFFu;
    bits += mant_odd;
    result = static_cast<uint8_t>(bits >> 21);
  }
  return static_cast<uint8_t>(result | (sign >> 24));
}

LTX_HOST_DEVICE inline float f8e5m2_to_f32(uint8_t v) {
  return f16_to_f32(static_cast<uint16_t>(static_cast<uint16_t>(v) << 8));
}

}  // namespace ltx::dtype_bits
