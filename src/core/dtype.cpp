#include "core/dtype.h"

#include "core/dtype_element.h"

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

namespace {

using namespace dtype_bits;

template <typename S, typename D, typename F>
void dense_loop(const void* src, void* dst, size_t n, F&& f) {
  const auto* s = static_cast<const S*>(src);
  auto* d = static_cast<D*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = f(s[i]);
}

}  // namespace

// The element semantics are convert_element's (core/dtype_element.h, shared with CUDA); the
// typed loops below are the same functions specialised for the weight-loading hot paths.
void convert_dense(const void* src, DType st, void* dst, DType dt, size_t n) {
  if (st == dt) {
    std::memcpy(dst, src, n * dtype_size(st));
    return;
  }
  if (dt == DType::F32) {
    switch (st) {
      case DType::BF16: return dense_loop<uint16_t, float>(src, dst, n, bf16_to_f32);
      case DType::F16:
        return dense_loop<uint16_t, float>(src, dst, n,
                                           [](uint16_t h) { return quiet_f32(f16_to_f32(h)); });
      case DType::F8E4M3FN:
        return dense_loop<uint8_t, float>(src, dst, n,
                                          [](uint8_t v) { return quiet_f32(f8e4m3fn_to_f32(v)); });
      default: break;
    }
  }
  if (st == DType::F32) {
    switch (dt) {
      case DType::BF16: return dense_loop<float, uint16_t>(src, dst, n, f32_to_bf16);
      case DType::F16: return dense_loop<float, uint16_t>(src, dst, n, f32_to_f16);
      default: break;
    }
  }
  const size_t ss = dtype_size(st), ds = dtype_size(dt);
  const auto* s = static_cast<const unsigned char*>(src);
  auto* d = static_cast<unsigned char*>(dst);
  for (size_t i = 0; i < n; ++i) convert_element(s + i * ss, st, d + i * ds, dt);
}

}  // namespace ltx
