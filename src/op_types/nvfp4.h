#pragma once
// NVFP4 weights (the reference's nvfp4-cast / nvfp4-prequant storage, ltx-kernels docs/NVFP4.md):
// the scalar rules shared by the dispatch layer (ops/nvfp4.h) and both backends, so that the CPU
// and CUDA quantisers and dequantisers agree bit for bit.
//
// A weight W [out, in] (in a multiple of 16) is held as three tensors:
//   packed        u8 [out, in/2]: two E2M1 codes a byte, element 2j of a row in the HIGH nibble
//                 of byte j, element 2j+1 in the low nibble;
//   block_scales  float8_e4m3fn [roundup(out, 128), roundup(in/16, 4)]: one scale per 16
//                 consecutive elements of a row, stored in cuBLAS's 128x4 tiled ("swizzled")
//                 layout (nvfp4_scale_offset), padding zero;
//   tensor_scale  f32 0-d: the per-tensor decode scale, amax|W| / (448 * 6).
// W[r][c] = e2m1(code) * (tensor_scale * e4m3(scale of block c/16)), the product in f32.
#include <cstdint>

#include "core/dtype_bits.h"
#include "core/tensor.h"

namespace ltx::ops {

inline constexpr int64_t kNvfp4BlockSize = 16;  // elements per E4M3 block scale
inline constexpr float kE2m1Max = 6.0f;
inline constexpr float kNvfp4E4m3Max = 448.0f;
// The per-tensor scale is amax times this f32 constant: the reference's quantiser runs on CUDA and
// multiplies by float(1.0 / 2688) rather than dividing by 2688 (they differ by an ulp at times).
inline constexpr float kNvfp4InvGlobalRange = static_cast<float>(1.0 / (448.0 * 6.0));

// A weight in NVFP4 form (layout above).
struct Nvfp4Weight {
  Tensor packed;        // u8 [out, in/2]
  Tensor block_scales;  // float8_e4m3fn [roundup(out, 128), roundup(in/16, 4)]
  Tensor tensor_scale;  // f32 0-d
};

LTX_HOST_DEVICE inline int64_t nvfp4_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Shape of the block-scale array of an [out, in] weight.
inline Shape nvfp4_block_scales_shape(int64_t out, int64_t in) {
  return {nvfp4_round_up(out, 128), nvfp4_round_up(in / kNvfp4BlockSize, 4)};
}

// Offset of block scale (row, col) in the tiled layout whose rows hold `padded_cols` scales
// (a multiple of 4): tiles of 128 rows x 4 columns, 512 bytes each, row-major over the tile grid;
// inside a tile, row r sits at (r % 32) * 16 + (r / 32) * 4, its 4 columns consecutive.
LTX_HOST_DEVICE inline int64_t nvfp4_scale_offset(int64_t row, int64_t col, int64_t padded_cols) {
  const int64_t tile = (row >> 7) * (padded_cols >> 2) + (col >> 2);
  const int64_t r = row & 127;
  return tile * 512 + (r & 31) * 16 + (r >> 5) * 4 + (col & 3);
}

// The value of an E2M1 code (bit 3 sign, bits 2-1 exponent, bit 0 mantissa):
// 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
LTX_HOST_DEVICE inline float e2m1_to_f32(uint8_t code) {
  const uint8_t mag = code & 7u;
  const float v = mag < 4 ? 0.5f * static_cast<float>(mag) : static_cast<float>(1 << (mag / 2 - 1)) *
                                                                 (1.0f + 0.5f * static_cast<float>(mag & 1u));
  return code & 8u ? -v : v;
}

// The E2M1 code nearest to v, ties to the even code, |v| past 6 (inf included) saturated to 6:
// the rounding of the hardware conversion the reference uses (cvt.rn.satfinite.e2m1x2.f32). The
// sign is kept for results that round to zero. E2M1 has no NaN: NaN becomes +6 here.
LTX_HOST_DEVICE inline uint8_t f32_to_e2m1(float v) {
  if (v != v) return 7u;
  const uint8_t sign = dtype_bits::f32_bits(v) >> 31 ? 8u : 0u;
  const float a = v < 0.0f ? -v : v;
  uint8_t mag;
  if (a <= 0.25f) mag = 0;        // the tie 0.25 goes to 0 (even)
  else if (a < 0.75f) mag = 1;    // 0.5
  else if (a <= 1.25f) mag = 2;   // 1.0 (0.75 and 1.25 tie to it)
  else if (a < 1.75f) mag = 3;    // 1.5
  else if (a <= 2.5f) mag = 4;    // 2.0 (1.75 and 2.5 tie to it)
  else if (a < 3.5f) mag = 5;     // 3.0
  else if (a <= 5.0f) mag = 6;    // 4.0 (3.5 and 5 tie to it)
  else mag = 7;                   // 6.0
  return static_cast<uint8_t>(sign | mag);
}

// |v| for the amax reductions: NaN is skipped by the max (fmax semantics, as the reference's
// nan_to_num / CUDA fmaxf), +-inf counts as the largest finite float.
LTX_HOST_DEVICE inline float nvfp4_amax_step(float amax, float v) {
  float a = v < 0.0f ? -v : v;
  if (a != a) return amax;
  if (a > 3.402823466e38f) a = 3.402823466e38f;
  return a > amax ? a : amax;
}

// The E4M3 bits of a block's scale: e4m3((amax / 6) / tensor_scale), capped at 448, as two
// correctly rounded divisions (the reference's layout contract); 0 when tensor_scale is 0.
LTX_HOST_DEVICE inline uint8_t nvfp4_block_scale(float block_amax, float tensor_scale) {
  if (!(tensor_scale > 0.0f)) return 0;
  float s = dtype_bits::div_rn(dtype_bits::div_rn(block_amax, kE2m1Max), tensor_scale);
  s = s < kNvfp4E4m3Max ? s : kNvfp4E4m3Max;
  return dtype_bits::f32_to_f8e4m3fn(s);
}

// The multiplier applied to a block's values before the E2M1 rounding: 1 / (tensor_scale *
// e4m3(scale)), the reciprocal correctly rounded, 0 for a zero scale.
LTX_HOST_DEVICE inline float nvfp4_block_multiplier(uint8_t scale_bits, float tensor_scale) {
  const float total = dtype_bits::mul_rn(tensor_scale, dtype_bits::f8e4m3fn_to_f32(scale_bits));
  return total > 0.0f ? dtype_bits::div_rn(1.0f, total) : 0.0f;
}

// The decoded value of one element in f32: e2m1(code) * (tensor_scale * e4m3(scale)).
LTX_HOST_DEVICE inline float nvfp4_decode(uint8_t code, uint8_t scale_bits, float tensor_scale) {
  const float scale = dtype_bits::mul_rn(tensor_scale, dtype_bits::f8e4m3fn_to_f32(scale_bits));
  return dtype_bits::mul_rn(e2m1_to_f32(code), scale);
}

}  // namespace ltx::ops
