#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace ltx {

namespace {
struct DTypeInfo {
  const char* name;
  size_t size;
  bool floating;
};
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"f32", 4, true},      {"f16", 2, true}, {"bf16", 2, true}, {"f8_e4m3fn", 1, true},
    {"f8_e5m2", 1, true},  {"f64", 8, true}, {"i8", 1, false},  {"u8", 1, false},
    {"i32", 4, false},     {"i64", 8, false}, {"bool", 1, false},
};
}  // namespace

size_t dtype_size(DType t) { return kInfo[static_cast<int>(t)].size; }
const char* dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }
bool dtype_is_floating(DType t) { return kInfo[static_cast<int>(t)].floating; }

bool dtype_from_name(std::string_view name, DType* out) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (name == kInfo[i].name) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

namespace dtype_bits {

// IEEE half from float, round to nearest even. Adding a power-of-two bias lets the FPU do the
// rounding of the dropped mantissa bits; overflow lands on inf, NaN becomes 0x7E00 (sign kept).
uint16_t f32_to_f16(float f) {
  const float scale_to_inf = f32_from_bits(0x77800000u);   // 2^112
  const float scale_to_zero = f32_from_bits(0x08800000u);  // 2^-110
  float base = (std::fabs(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = f32_bits(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = f32_from_bits((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = f32_bits(base);
  const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = bits & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
  // Zero or subnormal: value = mant * 2^-24, exact in float.
  const float v = static_cast<float>(mant) * f32_from_bits(0x33800000u);  // 2^-24
  return f32_from_bits(sign | f32_bits(v));
}

uint8_t f32_to_f8e4m3fn(float f) {
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
    bits = f32_bits(f32_from_bits(bits) + f32_from_bits(kDenormMask));
    result = static_cast<uint8_t>(bits - kDenormMask);
  } else {
    const uint32_t mant_odd = (bits >> 20) & 1u;
    bits += (static_cast<uint32_t>(7 - 127) << 23) + 0x7FFFFu;
    bits += mant_odd;
    result = static_cast<uint8_t>(bits >> 20);
  }
  return static_cast<uint8_t>(result | (sign >> 24));
}

float f8e4m3fn_to_f32(uint8_t v) {
  const uint32_t sign = (static_cast<uint32_t>(v) & 0x80u) << 24;
  const uint32_t exp = (v >> 3) & 0xFu;
  const uint32_t mant = v & 0x7u;
  if (exp == 0xF && mant == 0x7) return f32_from_bits(sign | 0x7FF00000u);  // NaN (torch's bits)
  if (exp != 0) return f32_from_bits(sign | ((exp + 120u) << 23) | (mant << 20));
  const float m = static_cast<float>(mant) * f32_from_bits(0x3B000000u);  // mant * 2^-9
  return f32_from_bits(sign | f32_bits(m));
}

uint8_t f32_to_f8e5m2(float f) {
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
    bits = f32_bits(f32_from_bits(bits) + f32_from_bits(kDenormMask));
    result = static_cast<uint8_t>(bits - kDenormMask);
  } else {
    const uint32_t mant_odd = (bits >> 21) & 1u;
    bits += (static_cast<uint32_t>(15 - 127) << 23) + 0xFFFFFu;
    bits += mant_odd;
    result = static_cast<uint8_t>(bits >> 21);
  }
  return static_cast<uint8_t>(result | (sign >> 24));
}

}  // namespace dtype_bits

namespace {

using namespace dtype_bits;

// Every source is read as either double (floats) or int64 (integers), then written; the narrow
// float targets go through float first, as c10 does.
double read_float(const void* src, DType st, size_t i) {
  switch (st) {
    case DType::F32: return static_cast<const float*>(src)[i];
    case DType::F64: return static_cast<const double*>(src)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
    case DType::F8E4M3FN: return f8e4m3fn_to_f32(static_cast<const uint8_t*>(src)[i]);
    case DType::F8E5M2: return f8e5m2_to_f32(static_cast<const uint8_t*>(src)[i]);
    case DType::I8: return static_cast<const int8_t*>(src)[i];
    case DType::U8: return static_cast<const uint8_t*>(src)[i];
    case DType::I32: return static_cast<const int32_t*>(src)[i];
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(src)[i]);
    case DType::Bool: return static_cast<const uint8_t*>(src)[i] != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

int64_t read_int(const void* src, DType st, size_t i) {
  switch (st) {
    case DType::I8: return static_cast<const int8_t*>(src)[i];
    case DType::U8: return static_cast<const uint8_t*>(src)[i];
    case DType::I32: return static_cast<const int32_t*>(src)[i];
    case DType::I64: return static_cast<const int64_t*>(src)[i];
    case DType::Bool: return static_cast<const uint8_t*>(src)[i] != 0;
    default: {
      const double d = read_float(src, st, i);
      // Out-of-range / NaN casts are undefined in C++; pin them to 0 like a saturated no-op.
      if (!(d > -9.2e18 && d < 9.2e18)) return 0;
      return static_cast<int64_t>(d);
    }
  }
}

bool read_nonzero(const void* src, DType st, size_t i) {
  if (dtype_is_floating(st)) return read_float(src, st, i) != 0.0;
  return read_int(src, st, i) != 0;
}

template <typename F>
void for_each(size_t n, F&& f) {
  for (size_t i = 0; i < n; ++i) f(i);
}

}  // namespace

void convert_dense(const void* src, DType st, void* dst, DType dt, size_t n) {
  if (st == dt) {
    std::memcpy(dst, src, n * dtype_size(st));
    return;
  }
  // Fast paths for the conversions on weight-loading hot paths.
  if (st == DType::BF16 && dt == DType::F32) {
    const auto* s = static_cast<const uint16_t*>(src);
    auto* d = static_cast<float*>(dst);
    for_each(n, [&](size_t i) { d[i] = bf16_to_f32(s[i]); });
    return;
  }
  if (st == DType::F32 && dt == DType::BF16) {
    const auto* s = static_cast<const float*>(src);
    auto* d = static_cast<uint16_t*>(dst);
    for_each(n, [&](size_t i) { d[i] = f32_to_bf16(s[i]); });
    return;
  }
  const bool src_float = dtype_is_floating(st);
  switch (dt) {
    case DType::F32: {
      auto* d = static_cast<float*>(dst);
      if (src_float)
        for_each(n, [&](size_t i) { d[i] = static_cast<float>(read_float(src, st, i)); });
      else
        for_each(n, [&](size_t i) { d[i] = static_cast<float>(read_int(src, st, i)); });
      return;
    }
    case DType::F64: {
      auto* d = static_cast<double*>(dst);
      if (src_float)
        for_each(n, [&](size_t i) { d[i] = read_float(src, st, i); });
      else
        for_each(n, [&](size_t i) { d[i] = static_cast<double>(read_int(src, st, i)); });
      return;
    }
    case DType::F16:
    case DType::BF16:
    case DType::F8E4M3FN:
    case DType::F8E5M2: {
      // float first (c10 constructs these from float), then round once to the target.
      auto to_float = [&](size_t i) {
        return src_float ? static_cast<float>(read_float(src, st, i))
                         : static_cast<float>(read_int(src, st, i));
      };
      if (dt == DType::F16) {
        auto* d = static_cast<uint16_t*>(dst);
        for_each(n, [&](size_t i) { d[i] = f32_to_f16(to_float(i)); });
      } else if (dt == DType::BF16) {
        auto* d = static_cast<uint16_t*>(dst);
        for_each(n, [&](size_t i) { d[i] = f32_to_bf16(to_float(i)); });
      } else if (dt == DType::F8E4M3FN) {
        auto* d = static_cast<uint8_t*>(dst);
        for_each(n, [&](size_t i) { d[i] = f32_to_f8e4m3fn(to_float(i)); });
      } else {
        auto* d = static_cast<uint8_t*>(dst);
        for_each(n, [&](size_t i) { d[i] = f32_to_f8e5m2(to_float(i)); });
      }
      return;
    }
    case DType::I8: {
      auto* d = static_cast<int8_t*>(dst);
      for_each(n, [&](size_t i) { d[i] = static_cast<int8_t>(read_int(src, st, i)); });
      return;
    }
    case DType::U8: {
      auto* d = static_cast<uint8_t*>(dst);
      for_each(n, [&](size_t i) { d[i] = static_cast<uint8_t>(read_int(src, st, i)); });
      return;
    }
    case DType::I32: {
      auto* d = static_cast<int32_t*>(dst);
      for_each(n, [&](size_t i) { d[i] = static_cast<int32_t>(read_int(src, st, i)); });
      return;
    }
    case DType::I64: {
      auto* d = static_cast<int64_t*>(dst);
      for_each(n, [&](size_t i) { d[i] = read_int(src, st, i); });
      return;
    }
    case DType::Bool: {
      auto* d = static_cast<uint8_t*>(dst);
      for_each(n, [&](size_t i) { d[i] = read_nonzero(src, st, i) ? 1 : 0; });
      return;
    }
  }
  fail("convert_dense: unknown dtype");
}

}  // namespace ltx
