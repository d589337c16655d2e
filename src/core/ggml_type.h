#pragma once
// The tensor types of GGML / GGUF files (ggml.h's enum ggml_type, numbered as stored in a GGUF
// tensor info): their names and block geometry. A quantized type stores `block_elems` values in
// `block_bytes` bytes; the dense types (F32, F16, BF16, F64, I8, I16, I32, I64) have blocks of one
// element. What each block holds and how it dequantises is in op_types/ggml_blocks.h; which types
// this build dequantises is quantization/ggml_dequant.h's business. Ids the format retired
// (4, 5, 31-33, 36-38) are not types.
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace ltx {

enum class GgmlType : int32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

struct GgmlTypeTraits {
  GgmlType type;
  const char* name;     // as gguf-py and the community files name it: "Q4_K", "BF16", ...
  int32_t block_elems;  // values per block (1 for the dense types)
  int32_t block_bytes;  // bytes per block
};

// The traits of a stored type id; nullptr when the format defines no type with that id.
const GgmlTypeTraits* ggml_type_traits(int32_t id);
const GgmlTypeTraits& ggml_traits(GgmlType type);
const char* ggml_type_name(GgmlType type);
// Parses a name as ggml_type_name() prints it (case-insensitive: "q4_k" works too).
std::optional<GgmlType> ggml_type_from_name(const std::string& name);
// The ltx element type of a dense GGML type (F32, F16, BF16, F64, I8, I32, I64); nullopt for the
// block-quantized types and for I16 (no ltx element type).
std::optional<DType> ggml_dense_dtype(GgmlType type);
// The GGML type storing a dense ltx dtype as is (F32, F16, BF16, F64, I8, I32, I64).
std::optional<GgmlType> ggml_type_of(DType dtype);
// True for the types whose values come in blocks of more than one element.
bool ggml_is_quantized(GgmlType type);

// Bytes of `elems` values of `type`; nullopt when `elems` is not a whole number of blocks or the
// size overflows 64 bits.
std::optional<uint64_t> ggml_nbytes(GgmlType type, uint64_t elems);

}  // namespace ltx
