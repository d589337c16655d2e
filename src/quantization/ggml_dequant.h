#pragma once
// Dequantising GGML blocks (GGUF tensors) to f32 on the CPU: the reference that the quantized
// GEMMs (dequantise a group of rows, then the dense GEMM) and the CUDA kernels are tested against.
// The per-block math is op_types/ggml_blocks.h's, bit-exact to ggml's dequantize_row_*.
#include <cstdint>
#include <string>

#include "core/ggml_type.h"
#include "core/tensor.h"
#include "io/gguf.h"

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

}  // namespace ltx::quantization
