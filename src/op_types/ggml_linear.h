#pragma once
// A linear layer's weight held as GGML blocks (a GGUF file's quantized tensor), shared by the
// dispatch layer (ops/ggml_linear.h) and both backends. The blocks run along the input features
// and never straddle two output rows, so any group of output rows dequantises on its own: the
// GEMMs dequantise a group of rows at a time instead of the whole weight.
#include <cstdint>

#include "core/ggml_type.h"
#include "core/tensor.h"

namespace ltx::ops {

struct GgmlWeight {
  Tensor blocks;              // u8 [out, bytes per row], contiguous: the rows as the file stores them
  GgmlType type = GgmlType::F32;
  int64_t in_features = 0;    // values per row, a whole number of the type's blocks

  int64_t out_features() const { return blocks.defined() ? blocks.size(0) : 0; }
};

}  // namespace ltx::ops
