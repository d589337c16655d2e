#include "quantization/ggml_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype_bits.h"
#include "core/error.h"
#include "core/parallel.h"
#include "op_types/ggml_blocks.h"
#include "quantization/ggml_dequant.h"

namespace ltx::quantization {

namespace {

constexpr GgmlType kQuantizable[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
    GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
};

// Values per parallel task (the K-quant searches cost ~100 operations a value).
constexpr int64_t kQuantValuesPerTask = int64_t{1} << 14;

// A group whose largest magnitude is below this is all zeros (the reference's GROUP_MAX_EPS).
constexpr float kGroupZero = 1e-15f;

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the integer in the
// low mantissa bits (the FPU rounds in the addition).
inline int round_even(float v) {
  const float shifted = v + 12582912.0f;
  uint32_t bits = 0;
  std::memcpy(&bits, &shifted, sizeof bits);
  return static_cast<int>(bits & 0x007FFFFFu) - 0x00400000;
}

inline void put_half(uint8_t* p, float v) {
  const uint16_t h = dtype_bits::f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

inline float half_value(float v) { return dtype_bits::f16_to_f32(dtype_bits::f32_to_f16(v)); }

inline void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// ------------------------------------------------------------------------ 32-value blocks

void block_q8_0(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(b, d);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

// The value of largest magnitude (the first one on ties), as Q4_0 / Q5_0 scale by it.
float signed_absmax(const float* x) {
  float amax = 0.0f, v = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      v = x[j];
    }
  return v;
}

// Q4_0 (bits 4, offset 8) and Q5_0 (bits 5, offset 16): symmetric around the largest value.
void block_sym(const float* x, uint8_t* b, int bits) {
  const int offset = 1 << (bits - 1);
  const int qmax = (1 << bits) - 1;
  const float d = signed_absmax(x) / static_cast<float>(-offset);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(b, d);
  uint8_t* qs = b + (bits == 4 ? 2 : 6);
  uint32_t qh = 0;
  const float bias = static_cast<float>(offset) + 0.5f;
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(qmax, static_cast<int>(x[j] * id + bias));
    const int hi = std::min(qmax, static_cast<int>(x[j + 16] * id + bias));
    qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
    qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
  }
  if (bits == 5) put_u32(b + 2, qh);
}

// Q4_1 (bits 4) and Q5_1 (bits 5): from the minimum up.
void block_affine(const float* x, uint8_t* b, int bits) {
  const int qmax = (1 << bits) - 1;
  float lo_v = x[0], hi_v = x[0];
  for (int j = 1; j < 32; ++j) {
    lo_v = std::min(lo_v, x[j]);
    hi_v = std::max(hi_v, x[j]);
  }
  const float d = (hi_v - lo_v) / static_cast<float>(qmax);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_half(b, d);
  put_half(b + 2, lo_v);
  uint8_t* qs = b + (bits == 4 ? 4 : 8);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(qmax, static_cast<int>((x[j] - lo_v) * id + 0.5f));
    const int hi = std::min(qmax, static_cast<int>((x[j + 16] - lo_v) * id + 0.5f));
    qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
    qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
  }
  if (bits == 5) put_u32(b + 4, qh);
}

// ------------------------------------------------------------------------ K-quants (256 values)

// A scale s and an offset m for n values so that x ~ s * q + m with q in [0, qmax]: start from the
// range, then try `steps` + 1 stretched grids ((qmax + lo + step * i) / range), each followed by
// the weighted least-squares s and m of its rounding (m <= 0 enforced), keeping the one of lowest
// weighted squared error. Returns s; *neg_min = -m (>= 0); q in `q`.
float fit_scale_min(int n, int qmax, const float* x, const float* w, uint8_t* q, float* neg_min,
                    float lo, float step, int steps) {
  float mn = x[0], mx = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (mn > 0) mn = 0;
  if (mx == mn) {
    std::fill(q, q + n, uint8_t{0});
    *neg_min = -mn;
    return 0.0f;
  }
  float iscale = static_cast<float>(qmax) / (mx - mn);
  float scale = 1.0f / iscale;
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    q[i] = static_cast<uint8_t>(std::clamp(round_even(iscale * (x[i] - mn)), 0, qmax));
    const float diff = scale * q[i] + mn - x[i];
    best += w[i] * (diff * diff);
  }
  uint8_t trial[32];
  for (int s = 0; s <= steps; ++s) {
    iscale = (lo + step * s + qmax) / (mx - mn);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(round_even(iscale * (x[i] - mn)), 0, qmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float s_try = (sum_w * sum_xl - sum_x * sum_l) / det;
    float m_try = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (m_try > 0) {
      m_try = 0;
      s_try = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = s_try * trial[i] + m_try - x[i];
      err += w[i] * (diff * diff);
    }
    if (err < best) {
      std::copy(trial, trial + n, q);
      best = err;
      scale = s_try;
      mn = m_try;
    }
  }
  *neg_min = -mn;
  return scale;
}

// Q4_K (bits 4) and Q5_K (bits 5).
void block_k_affine(const float* x, uint8_t* b, int bits) {
  const int qmax = (1 << bits) - 1;
  uint8_t q[256];
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xs[l]);
    scales[j] = bits == 4 ? fit_scale_min(32, qmax, xs, w, q + 32 * j, &mins[j], -1.0f, 0.1f, 20)
                          : fit_scale_min(32, qmax, xs, w, q + 32 * j, &mins[j], -0.5f, 0.1f, 15);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t* sc = b + 4;
  std::memset(sc, 0, 12);
  for (int j = 0; j < 8; ++j) {
    const auto ls = std::min<uint8_t>(63, static_cast<uint8_t>(round_even(inv_scale * scales[j])));
    const auto lm = std::min<uint8_t>(63, static_cast<uint8_t>(round_even(inv_min * mins[j])));
    if (j < 4) {
      sc[j] = ls;
      sc[j + 4] = lm;
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls & 0x0F) | ((lm & 0x0F) << 4));
      sc[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      sc[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  put_half(b, max_scale / 63.0f);
  put_half(b + 2, max_min / 63.0f);
  const float d = ops::ggml::half_at(b);
  const float dmin = ops::ggml::half_at(b + 2);
  // Re-round every value against the coded (6-bit) scale and min.
  for (int j = 0; j < 8; ++j) {
    int s = 0, m = 0;
    ops::ggml::k4_scale_min(sc, j, &s, &m);
    const float dl = d * s;
    if (dl == 0.0f) continue;
    const float ml = dmin * m;
    for (int l = 0; l < 32; ++l)
      q[32 * j + l] = static_cast<uint8_t>(std::clamp(round_even((x[32 * j + l] + ml) / dl), 0, qmax));
  }
  if (bits == 4) {
    uint8_t* qs = b + 16;
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    return;
  }
  uint8_t* qh = b + 16;
  uint8_t* ql = b + 48;
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c) {
    const auto bit_lo = static_cast<uint8_t>(1u << (2 * c));
    const auto bit_hi = static_cast<uint8_t>(2u << (2 * c));
    for (int l = 0; l < 32; ++l) {
      int v1 = q[64 * c + l], v2 = q[64 * c + 32 + l];
      if (v1 > 15) {
        v1 -= 16;
        qh[l] |= bit_lo;
      }
      if (v2 > 15) {
        v2 -= 16;
        qh[l] |= bit_hi;
      }
      ql[32 * c + l] = static_cast<uint8_t>(v1 | (v2 << 4));
    }
  }
}

// A signed scale for 16 values coded in [-32, 31] (q stored + 32): the grid through the value of
// largest magnitude, then 18 stretches of it, keeping the best x^2-weighted least-squares fit.
float fit_signed_scale(const float* x, int8_t* q) {
  constexpr int n = 16, half = 32;
  float amax = 0, vmax = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  if (amax < kGroupZero) {
    std::fill(q, q + n, int8_t{0});
    return 0.0f;
  }
  auto quantise = [&](float iscale, float* sum_lx, float* sum_l2, bool store) {
    *sum_lx = 0;
    *sum_l2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(round_even(iscale * x[i]), -half, half - 1);
      if (store) q[i] = static_cast<int8_t>(l + half);
      const float w = x[i] * x[i];
      *sum_lx += w * x[i] * l;
      *sum_l2 += w * l * l;
    }
  };
  float sum_lx = 0, sum_l2 = 0;
  quantise(static_cast<float>(-half) / vmax, &sum_lx, &sum_l2, true);
  float scale = sum_l2 != 0 ? sum_lx / sum_l2 : 0.0f;
  float best = scale * sum_lx;
  for (int s = -9; s <= 9; ++s) {
    if (s == 0) continue;
    const float iscale = -(half + 0.1f * s) / vmax;
    quantise(iscale, &sum_lx, &sum_l2, false);
    if (sum_l2 > 0 && sum_lx * sum_lx > best * sum_l2) {
      quantise(iscale, &sum_lx, &sum_l2, true);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

void block_q6_k(const float* x, uint8_t* b) {
  int8_t q[256];
  float scales[16];
  float max_scale = 0, max_abs = 0;
  for (int g = 0; g < 16; ++g) {
    scales[g] = fit_signed_scale(x + 16 * g, q + 16 * g);
    if (std::fabs(scales[g]) > max_abs) {
      max_abs = std::fabs(scales[g]);
      max_scale = scales[g];
    }
  }
  std::memset(b, 0, 210);
  if (max_abs < kGroupZero) return;  // d = 0: every value dequantises to 0
  const float iscale = -128.0f / max_scale;
  put_half(b + 208, 1 / iscale);
  auto* sc = reinterpret_cast<int8_t*>(b + 192);
  for (int g = 0; g < 16; ++g) sc[g] = static_cast<int8_t>(std::min(127, round_even(iscale * scales[g])));
  const float d = ops::ggml::half_at(b + 208);
  for (int g = 0; g < 16; ++g) {
    const float dl = d * sc[g];
    if (dl == 0.0f) continue;
    for (int i = 0; i < 16; ++i)
      q[16 * g + i] = static_cast<int8_t>(std::clamp(round_even(x[16 * g + i] / dl), -32, 31) + 32);
  }
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  for (int h = 0; h < 2; ++h) {
    const int8_t* v = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((v[l] & 0x0F) | ((v[l + 64] & 0x0F) << 4));
      ql[l + 32] = static_cast<uint8_t>((v[l + 32] & 0x0F) | ((v[l + 96] & 0x0F) << 4));
      qh[l] = static_cast<uint8_t>((v[l] >> 4) | ((v[l + 32] >> 4) << 2) | ((v[l + 64] >> 4) << 4) |
                                   ((v[l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}

void quantize_block(GgmlType type, const float* x, uint8_t* b) {
  switch (type) {
    case GgmlType::F32: std::memcpy(b, x, 4); return;
    case GgmlType::F16: {
      const uint16_t h = dtype_bits::f32_to_f16(*x);
      std::memcpy(b, &h, 2);
      return;
    }
    case GgmlType::BF16: {
      const uint16_t h = dtype_bits::f32_to_bf16(*x);
      std::memcpy(b, &h, 2);
      return;
    }
    case GgmlType::Q4_0: block_sym(x, b, 4); return;
    case GgmlType::Q5_0: block_sym(x, b, 5); return;
    case GgmlType::Q4_1: block_affine(x, b, 4); return;
    case GgmlType::Q5_1: block_affine(x, b, 5); return;
    case GgmlType::Q8_0: block_q8_0(x, b); return;
    case GgmlType::Q4_K: block_k_affine(x, b, 4); return;
    case GgmlType::Q5_K: block_k_affine(x, b, 5); return;
    case GgmlType::Q6_K: block_q6_k(x, b); return;
    default: break;
  }
  fail("quantize_rows: no quantiser for ", ggml_type_name(type));
}

}  // namespace

bool ggml_can_quantize(GgmlType type) {
  return std::find(std::begin(kQuantizable), std::end(kQuantizable), type) != std::end(kQuantizable);
}

std::string ggml_quantizable_types() {
  std::string s;
  for (GgmlType t : kQuantizable) {
    if (!s.empty()) s += ", ";
    s += ggml_type_name(t);
  }
  return s;
}

void quantize_rows(GgmlType type, const float* x, int64_t rows, int64_t cols, void* out) {
  LTX_CHECK(ggml_can_quantize(type), "quantize_rows: ltx cannot write GGML type ",
            ggml_type_name(type), " (it writes ", ggml_quantizable_types(), ")");
  LTX_CHECK(rows >= 0, "quantize_rows: negative row count ", rows);
  ggml_row_bytes(type, cols);  // checks that rows are whole blocks
  if (rows == 0 || cols == 0) return;
  const GgmlTypeTraits& t = ggml_traits(type);
  auto* dst = static_cast<uint8_t*>(out);
  // Blocks never straddle rows: the flat data is a run of whole blocks.
  const int64_t total_blocks = rows * (cols / t.block_elems);
  const int64_t grain = std::max<int64_t>(1, kQuantValuesPerTask / t.block_elems);
  parallel_for(0, total_blocks, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) quantize_block(type, x + b * t.block_elems, dst + b * t.block_bytes);
  });
}

}  // namespace ltx::quantization
