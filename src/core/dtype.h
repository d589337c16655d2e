#pragma once
// Element types and bit-exact scalar conversions. The rounding rules are PyTorch's (c10):
// f32 -> bf16/f16 round to nearest even, NaN -> canonical quiet NaN; f32 -> float8_e4m3fn
// rounds to nearest even, |x| >= 480 (incl. inf) -> NaN (no saturation, as torch's .to() does);
// f32 -> float8_e5m2 rounds to nearest even, overflow -> inf, NaN -> NaN. f64 goes through f32
// first, exactly like c10's half/bfloat16/fp8 constructors that take a float.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/dtype_bits.h"

namespace ltx {

enum class DType : uint8_t { F32, F16, BF16, F8E4M3FN, F8E5M2, F64, I8, U8, I32, I64, Bool };

inline constexpr int kNumDTypes = 11;

size_t dtype_size(DType t);
// Short lower-case name used in messages and `ltx inspect` ("f32", "bf16", "f8_e4m3fn", ...).
const char* dtype_name(DType t);
bool dtype_is_floating(DType t);
// Parses the short names above; returns false when unknown.
bool dtype_from_name(std::string_view name, DType* out);

// The scalar bit conversions (f32 <-> bf16/f16/f8) live in ltx::dtype_bits (core/dtype_bits.h),
// shared with the CUDA kernels; core/dtype_element.h converts one element between any two dtypes.

// Storage types for the 16- and 8-bit floats: plain bit containers, converted explicitly.
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};
struct f8e4m3fn {
  uint8_t bits;
};
struct f8e5m2 {
  uint8_t bits;
};

// Maps a C++ element type to its DType (for typed data access).
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::BF16; };
template <> struct DTypeOf<f16> { static constexpr DType value = DType::F16; };
template <> struct DTypeOf<f8e4m3fn> { static constexpr DType value = DType::F8E4M3FN; };
template <> struct DTypeOf<f8e5m2> { static constexpr DType value = DType::F8E5M2; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::I8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };

// Converts `n` elements from `src` (type `st`) to `dst` (type `dt`), both densely packed.
// Float -> int truncates toward zero; anything -> bool is (x != 0).
void convert_dense(const void* src, DType st, void* dst, DType dt, size_t n);

}  // namespace ltx
