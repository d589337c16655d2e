#include "core/ggml_type.h"

#include <cctype>

#include "core/error.h"

namespace ltx {

namespace {

// Sizes from ggml's type traits (ggml.c) and gguf-py's GGML_QUANT_SIZES.
constexpr GgmlTypeTraits kTypes[] = {
    {GgmlType::F32, "F32", 1, 4},          {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},      {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},      {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},      {GgmlType::Q8_1, "Q8_1", 32, 40},
    {GgmlType::Q2_K, "Q2_K", 256, 84},     {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},    {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66}, {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98}, {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},  {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},   {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},            {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},          {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},          {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},        {GgmlType::TQ1_0, "TQ1_0", 256, 54},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66},   {GgmlType::MXFP4, "MXFP4", 32, 17},
};

struct DenseType {
  GgmlType type;
  DType dtype;
};
constexpr DenseType kDense[] = {
    {GgmlType::F32, DType::F32}, {GgmlType::F16, DType::F16}, {GgmlType::BF16, DType::BF16},
    {GgmlType::F64, DType::F64}, {GgmlType::I8, DType::I8},   {GgmlType::I32, DType::I32},
    {GgmlType::I64, DType::I64},
};

}  // namespace

const GgmlTypeTraits* ggml_type_traits(int32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<int32_t>(t.type) == id) return &t;
  return nullptr;
}

const GgmlTypeTraits& ggml_traits(GgmlType type) {
  const GgmlTypeTraits* t = ggml_type_traits(static_cast<int32_t>(type));
  LTX_CHECK(t != nullptr, "ggml: no GGML type with id ", static_cast<int32_t>(type));
  return *t;
}

const char* ggml_type_name(GgmlType type) { return ggml_traits(type).name; }

std::optional<GgmlType> ggml_type_from_name(const std::string& name) {
  for (const auto& t : kTypes) {
    const std::string n = t.name;
    if (n.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < n.size() && same; ++i)
      same = std::toupper(static_cast<unsigned char>(name[i])) == n[i];
    if (same) return t.type;
  }
  return std::nullopt;
}

std::optional<DType> ggml_dense_dtype(GgmlType type) {
  for (const auto& d : kDense)
    if (d.type == type) return d.dtype;
  return std::nullopt;
}

std::optional<GgmlType> ggml_type_of(DType dtype) {
  for (const auto& d : kDense)
    if (d.dtype == dtype) return d.type;
  return std::nullopt;
}

bool ggml_is_quantized(GgmlType type) { return ggml_traits(type).block_elems > 1; }

std::optional<uint64_t> ggml_nbytes(GgmlType type, uint64_t elems) {
  const GgmlTypeTraits& t = ggml_traits(type);
  const auto block = static_cast<uint64_t>(t.block_elems);
  if (elems % block != 0) return std::nullopt;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elems / block, static_cast<uint64_t>(t.block_bytes), &bytes))
    return std::nullopt;
  return bytes;
}

}  // namespace ltx
