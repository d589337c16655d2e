#pragma once
// CUDA rotary embeddings (src/ops/rope.h semantics). x f32 or bf16 with any strides; cos/sin f32
// or bf16, already expanded to x's leading dims by the caller (stride 0 where broadcast); the
// result is a new contiguous tensor of x's dtype. Each output is two products and one sum, each
// rounded on its own as on the CPU, so f32 results are bit-identical to the CPU's.
#include "core/tensor.h"
#include "ops/rope.h"

namespace ltx::cuda {

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout);
// apply_rope takes a vector path (16-byte loads and stores, one thread per 8 table entries of a
// row) when the table width (D / 2 Split, D Interleaved) is a multiple of 8, x, cos and sin are f32
// or bf16 with unit stride along the last dim, their leading strides are multiples of 8 and their
// data 16-byte aligned; bit-identical to the general path (one thread per pair). Whether that path
// is taken for these arguments (cos/sin expanded as for apply_rope; for the tests):
bool rope_vectorised(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout);

}  // namespace ltx::cuda
