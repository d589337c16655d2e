#pragma once
// CUDA rotary embeddings (src/ops/rope.h semantics). x f32 or bf16 with any strides; cos/sin f32
// or bf16, already expanded to x's leading dims by the caller (stride 0 where broadcast); the
// result is a new contiguous tensor of x's dtype. Each output is two products and one sum, each
// rounded on its own as on the CPU, so f32 results are bit-identical to the CPU's.
#include "core/tensor.h"
#include "ops/rope.h"

namespace ltx::cuda {

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout);

}  // namespace ltx::cuda
