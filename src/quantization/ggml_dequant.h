#pragma once
// Dequantising GGML blocks (GGUF tensors) to f32 on the CPU: the reference that the quantized
// GEMMs (dequantise a group of rows, then the dense GEMM) and the CUDA kernels are tested against.
// The per-block math is op_types/ggml_blocks.h's, bit-exact to ggml's dequantize_row_*.
#include <cstdint>
#include <optional>
#include <string>

#include "core/ggml_type.h"
#include "core/tensor.h"
#include "io/gguf.h"
#include "io/weights.h"

namespace ltx::quantization {

// True for the types this build dequantises: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K.
bool ggml_can_dequantize(GgmlType type);
// "F32, F16, BF16, Q4_0, ..." (for messages).
std::string ggml_dequantizable_types();
// Throws naming `what` (a tensor, a file), the type and the supported set when `type` is not one
// that ggml_can_dequantize.
void check_ggml_dequantizable(GgmlType type, const std::string& what);

// Bytes of one row of `cols` values; throws when cols is not a whole number of blocks.
int64_t ggml_row_bytes(GgmlType type, int64_t cols);

// Dequantises `rows` rows of `cols` values each (cols a multiple of the block size), stored one
// after the other (row r starts at byte r * ggml_row_bytes(type, cols)), into out[rows * cols]
// (row-major). Large inputs are split over the thread pool; the result does not depend on the
// split.
void dequantize_rows(GgmlType type, const void* blocks, int64_t rows, int64_t cols, float* out);

// A GGML tensor (see io::GgmlTensor) as a contiguous CPU tensor of `dtype` (f32, or bf16 / f16,
// rounded from the f32 values) with the tensor's logical shape.
Tensor dequantize(const io::GgmlTensor& tensor, DType dtype = DType::F32);

// WeightMap::take for parameters that are not a Linear's weight (tables, registers, embeddings):
// a tensor a GGUF file stores in GGML blocks is dequantised here (to `dtype` on `device`, a copy),
// any other goes through take() unchanged. Missing and misshaped names are recorded as take()
// records them.
Tensor take_dense(io::WeightMap& w, const std::string& name, const Shape& expected, DType dtype,
                  Device device = Device::cpu());
// As take_dense; an absent name gives nullopt (take_optional).
std::optional<Tensor> take_dense_optional(io::WeightMap& w, const std::string& name,
                                          const Shape& expected, DType dtype,
                                          Device device = Device::cpu());

}  // namespace ltx::quantization
