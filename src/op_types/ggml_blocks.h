#pragma once
// GGML block formats (the quantized tensors of GGUF files): what one block holds and how it
// dequantises to f32, exactly as ggml's reference dequantize_row_* defines it. One function per
// type writes the block's values in order; the CPU dequantiser (quantization/ggml_dequant.h) and
// the CUDA kernels call the same code, so they agree bit for bit. Every product and sum rounds on
// its own (mul_rn / add_rn: no FMA contraction), as the reference's separate float ops do.
//
// Layouts (little-endian; "half" = IEEE f16; offsets in bytes):
//   Q4_0  32 values, 18 B: d half @0, qs[16] @2 (value j low nibble of qs[j], j+16 the high one)
//         x = (q - 8) * d
//   Q4_1  32 values, 20 B: d @0, m @2, qs[16] @4; x = q * d + m
//   Q5_0  32 values, 22 B: d @0, qh u32 @2 (bit j = 5th bit of value j), qs[16] @6;
//         x = (q - 16) * d
//   Q5_1  32 values, 24 B: d @0, m @2, qh @4, qs[16] @8; x = q * d + m
//   Q8_0  32 values, 34 B: d @0, qs int8[32] @2; x = q * d
//   Q2_K  256 values, 84 B: scales[16] @0 (low nibble scale, high nibble min, per 16 values),
//         qs[64] @16 (2 bits), d @80, dmin @82; x = (d * sc) * q - dmin * m
//   Q3_K  256 values, 110 B: hmask[32] @0 (3rd bit, inverted: clear means -4), qs[64] @32,
//         scales[12] @96 (16 six-bit scales, biased by 32), d @108; x = (d * (sc - 32)) * q
//   Q4_K  256 values, 144 B: d @0, dmin @2, scales[12] @4 (8 six-bit scale / min pairs),
//         qs[128] @16; x = (d * sc) * q - dmin * m, per 32 values
//   Q5_K  256 values, 176 B: as Q4_K with qh[32] @16 (5th bits) and qs[128] @48
//   Q6_K  256 values, 210 B: ql[128] @0, qh[64] @128, scales int8[16] @192, d @208;
//         x = (d * sc) * (q - 32), per 16 values
#include <cstdint>

#include "core/dtype_bits.h"
#include "core/ggml_type.h"

namespace ltx::ops::ggml {

using dtype_bits::add_rn;
using dtype_bits::mul_rn;

LTX_HOST_DEVICE inline float half_at(const uint8_t* p) {
  return dtype_bits::f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}

LTX_HOST_DEVICE inline uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// a * b - c with each step rounded.
LTX_HOST_DEVICE inline float mul_sub(float a, float b, float c) { return add_rn(mul_rn(a, b), -c); }

LTX_HOST_DEVICE inline void dequantize_q4_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = mul_rn(static_cast<float>((qs[j] & 0x0F) - 8), d);
    y[j + 16] = mul_rn(static_cast<float>((qs[j] >> 4) - 8), d);
  }
}

LTX_HOST_DEVICE inline void dequantize_q4_1(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const float m = half_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = add_rn(mul_rn(static_cast<float>(qs[j] & 0x0F), d), m);
    y[j + 16] = add_rn(mul_rn(static_cast<float>(qs[j] >> 4), d), m);
  }
}

LTX_HOST_DEVICE inline void dequantize_q5_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint32_t qh = u32_at(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = mul_rn(static_cast<float>(((qs[j] & 0x0F) | hi0) - 16), d);
    y[j + 16] = mul_rn(static_cast<float>(((qs[j] >> 4) | hi1) - 16), d);
  }
}

LTX_HOST_DEVICE inline void dequantize_q5_1(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const float m = half_at(b + 2);
  const uint32_t qh = u32_at(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = add_rn(mul_rn(static_cast<float>((qs[j] & 0x0F) | hi0), d), m);
    y[j + 16] = add_rn(mul_rn(static_cast<float>((qs[j] >> 4) | hi1), d), m);
  }
}

LTX_HOST_DEVICE inline void dequantize_q8_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  for (int j = 0; j < 32; ++j) y[j] = mul_rn(static_cast<float>(static_cast<int8_t>(b[2 + j])), d);
}

LTX_HOST_DEVICE inline void dequantize_q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = half_at(b + 80);
  const float dmin = half_at(b + 82);
  int is = 0;
  for (int n = 0; n < 2; ++n) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = scales[is++];
        const float dl = mul_rn(d, static_cast<float>(sc & 0x0F));
        const float ml = mul_rn(dmin, static_cast<float>(sc >> 4));
        const uint8_t* qq = q + 16 * half;
        for (int l = 0; l < 16; ++l) *y++ = mul_sub(dl, static_cast<float>((qq[l] >> shift) & 3), ml);
      }
    }
    q += 32;
  }
}

// The 16 six-bit scales of a Q3_K block, unbiased (-32 .. 31).
LTX_HOST_DEVICE inline int q3_k_scale(const uint8_t* s, int i) {
  const int low = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
  const int high = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
  return (low | (high << 4)) - 32;
}

LTX_HOST_DEVICE inline void dequantize_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* q = b + 32;
  const uint8_t* scales = b + 96;
  const float d = half_at(b + 108);
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 2; ++n) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const float dl = mul_rn(d, static_cast<float>(q3_k_scale(scales, is++)));
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((hmask[l] & m) ? 0 : 4);
          *y++ = mul_rn(dl, static_cast<float>(v));
        }
      }
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

// Scale and min j (0..7) of a Q4_K / Q5_K block's 12-byte scale field.
LTX_HOST_DEVICE inline void k4_scale_min(const uint8_t* s, int j, int* sc, int* mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

LTX_HOST_DEVICE inline void dequantize_q4_k(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const float dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < 4; ++j) {
    int sc = 0, mn = 0;
    k4_scale_min(scales, 2 * j, &sc, &mn);
    const float d1 = mul_rn(d, static_cast<float>(sc));
    const float m1 = mul_rn(dmin, static_cast<float>(mn));
    k4_scale_min(scales, 2 * j + 1, &sc, &mn);
    const float d2 = mul_rn(d, static_cast<float>(sc));
    const float m2 = mul_rn(dmin, static_cast<float>(mn));
    for (int l = 0; l < 32; ++l) *y++ = mul_sub(d1, static_cast<float>(q[l] & 0x0F), m1);
    for (int l = 0; l < 32; ++l) *y++ = mul_sub(d2, static_cast<float>(q[l] >> 4), m2);
    q += 32;
  }
}

LTX_HOST_DEVICE inline void dequantize_q5_k(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const float dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 4; ++j) {
    int sc = 0, mn = 0;
    k4_scale_min(scales, 2 * j, &sc, &mn);
    const float d1 = mul_rn(d, static_cast<float>(sc));
    const float m1 = mul_rn(dmin, static_cast<float>(mn));
    k4_scale_min(scales, 2 * j + 1, &sc, &mn);
    const float d2 = mul_rn(d, static_cast<float>(sc));
    const float m2 = mul_rn(dmin, static_cast<float>(mn));
    for (int l = 0; l < 32; ++l)
      *y++ = mul_sub(d1, static_cast<float>((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)), m1);
    for (int l = 0; l < 32; ++l)
      *y++ = mul_sub(d2, static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)), m2);
    ql += 32;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

LTX_HOST_DEVICE inline void dequantize_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int n = 0; n < 2; ++n) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = mul_rn(mul_rn(d, static_cast<float>(sc[is])), static_cast<float>(q1));
      y[l + 32] = mul_rn(mul_rn(d, static_cast<float>(sc[is + 2])), static_cast<float>(q2));
      y[l + 64] = mul_rn(mul_rn(d, static_cast<float>(sc[is + 4])), static_cast<float>(q3));
      y[l + 96] = mul_rn(mul_rn(d, static_cast<float>(sc[is + 6])), static_cast<float>(q4));
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// The block geometry of the types below, as compile-time constants for the kernels (the same
// numbers as core/ggml_type.cpp's table); 0 for a type without a dequantiser here.
LTX_HOST_DEVICE constexpr int block_elems(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return 1;
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0: return 32;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return 256;
    default: return 0;
  }
}

LTX_HOST_DEVICE constexpr int block_bytes(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return 4;
    case GgmlType::F16:
    case GgmlType::BF16: return 2;
    case GgmlType::Q4_0: return 18;
    case GgmlType::Q4_1: return 20;
    case GgmlType::Q5_0: return 22;
    case GgmlType::Q5_1: return 24;
    case GgmlType::Q8_0: return 34;
    case GgmlType::Q2_K: return 84;
    case GgmlType::Q3_K: return 110;
    case GgmlType::Q4_K: return 144;
    case GgmlType::Q5_K: return 176;
    case GgmlType::Q6_K: return 210;
    default: return 0;
  }
}

// True for the types dequantize_block handles.
LTX_HOST_DEVICE constexpr bool has_dequantizer(GgmlType type) { return block_elems(type) > 0; }

// Dequantises one block of `type` (block_elems values, see core/ggml_type.h) into y. Returns false
// for a type this code does not dequantise (the caller names it); the dense F32 / F16 / BF16
// "blocks" are single values.
LTX_HOST_DEVICE inline bool dequantize_block(GgmlType type, const uint8_t* b, float* y) {
  switch (type) {
    case GgmlType::F32:
      *y = dtype_bits::f32_from_bits(u32_at(b));
      return true;
    case GgmlType::F16:
      *y = half_at(b);
      return true;
    case GgmlType::BF16:
      *y = dtype_bits::bf16_to_f32(static_cast<uint16_t>(b[0] | (b[1] << 8)));
      return true;
    case GgmlType::Q4_0: dequantize_q4_0(b, y); return true;
    case GgmlType::Q4_1: dequantize_q4_1(b, y); return true;
    case GgmlType::Q5_0: dequantize_q5_0(b, y); return true;
    case GgmlType::Q5_1: dequantize_q5_1(b, y); return true;
    case GgmlType::Q8_0: dequantize_q8_0(b, y); return true;
    case GgmlType::Q2_K: dequantize_q2_k(b, y); return true;
    case GgmlType::Q3_K: dequantize_q3_k(b, y); return true;
    case GgmlType::Q4_K: dequantize_q4_k(b, y); return true;
    case GgmlType::Q5_K: dequantize_q5_k(b, y); return true;
    case GgmlType::Q6_K: dequantize_q6_k(b, y); return true;
    default: return false;
  }
}

}  // namespace ltx::ops::ggml
