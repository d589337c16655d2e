#pragma once
// Quantising f32 values into GGML blocks (the tensors of GGUF files), as ggml's reference
// quantisers define them (ggml-quants.c, quantize_row_*_ref: what llama.cpp's llama-quantize runs
// without an importance matrix, and so what the community LTX GGUF files were made with). The
// blocks are those op_types/ggml_blocks.h describes and quantization/ggml_dequant.h reads back.
//
// Per type (every block on its own, so the result does not depend on how rows are split):
//   Q8_0  d = amax / 127, q = round(x / d) (half away from zero)
//   Q4_0  d = v / -8 for the value v of largest magnitude, q = min(15, trunc(x / d + 8.5))
//   Q5_0  the same with -16, 16.5 and 31
//   Q4_1  d = (max - min) / 15, m = min, q = min(15, trunc((x - min) / d + 0.5)); Q5_1 with 31
//   Q4_K  per 32 values a scale and a min fitted by a weighted least-squares search over 21 grid
//         stretches (weights |x| + rms of the 32), both coded in 6 bits against the block's f16
//         d / dmin, then every value re-rounded against the coded scale and min
//   Q5_K  as Q4_K with 5-bit values and 16 search steps
//   Q6_K  per 16 values a signed scale from a weighted (x^2) search over 19 stretches, coded in
//         8 bits against the block's f16 d, values re-rounded to [-32, 31]
//   F32 / F16 / BF16  the values (f16 and bf16 rounded to nearest even)
// The arithmetic is the reference's step for step in f32 (this project builds without FMA
// contraction); a llama.cpp build that contracts multiply-adds may differ in rare last-bit ties.
#include <cstdint>
#include <string>

#include "core/ggml_type.h"

namespace ltx::quantization {

// True for the types quantize_rows writes: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K, Q6_K.
bool ggml_can_quantize(GgmlType type);
// "F32, F16, BF16, Q4_0, ..." (for messages).
std::string ggml_quantizable_types();

// Quantises `rows` rows of `cols` values (row-major f32, cols a multiple of the type's block) into
// `out` (rows * ggml_row_bytes(type, cols) bytes, rows one after the other). Split over the thread
// pool by blocks; the bytes do not depend on the split. Throws for a type it does not write or
// rows that are not whole blocks. Non-finite inputs give what the reference gives (garbage in,
// garbage out): callers check finiteness first when they care.
void quantize_rows(GgmlType type, const float* x, int64_t rows, int64_t cols, void* out);

}  // namespace ltx::quantization
