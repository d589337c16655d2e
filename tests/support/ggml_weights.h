#pragma once
// GGML weights made in tests: random blocks of every type ltx computes with, whose f16 scale
// fields hold small finite values (random bytes there could be inf / NaN), so that products stay
// comparable; the other bytes (quants, 6-bit scales, high bits) are random.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype_bits.h"
#include "core/ggml_type.h"
#include "core/tensor.h"
#include "op_types/ggml_blocks.h"
#include "op_types/ggml_linear.h"

namespace ltx::test {

// Every type the GEMMs take.
inline const std::vector<GgmlType>& ggml_compute_types() {
  static const std::vector<GgmlType> types = {
      GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
      GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
      GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
  return types;
}

// Byte offsets of a block's f16 scales (ggml-common.h's block layouts).
inline std::vector<int> ggml_scale_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {0};  // Q4_0, Q5_0, Q8_0
  }
}

// Random [out, in] weight of `type` (in a whole number of blocks), as u8 rows on the CPU.
inline ops::GgmlWeight random_ggml_weight(GgmlType type, int64_t out, int64_t in, uint64_t seed) {
  const int elems = ops::ggml::block_elems(type), bytes = ops::ggml::block_bytes(type);
  const int64_t row_bytes = in / elems * bytes;
  Tensor blocks = Tensor::empty({out, row_bytes}, DType::U8);
  auto* p = blocks.data<uint8_t>();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f), scale(-0.05f, 0.05f);
  const auto put16 = [](uint8_t* at, uint16_t v) { std::memcpy(at, &v, 2); };
  const int64_t n_blocks = out * (in / elems);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = p + b * bytes;
    switch (type) {
      case GgmlType::F32: {
        const float v = value(rng);
        std::memcpy(blk, &v, 4);
        break;
      }
      case GgmlType::F16: put16(blk, dtype_bits::f32_to_f16(value(rng))); break;
      case GgmlType::BF16: put16(blk, dtype_bits::f32_to_bf16(value(rng))); break;
      default:
        for (int i = 0; i < bytes; ++i) blk[i] = static_cast<uint8_t>(rng());
        for (int off : ggml_scale_offsets(type)) put16(blk + off, dtype_bits::f32_to_f16(scale(rng)));
    }
  }
  return {blocks, type, in};
}

// Values per row that make `blocks` whole blocks of `type`.
inline int64_t ggml_row_len(GgmlType type, int64_t blocks) {
  return blocks * ops::ggml::block_elems(type);
}

}  // namespace ltx::test
