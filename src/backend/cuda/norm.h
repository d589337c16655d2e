#pragma once
// CUDA normalisations over the last dim (src/ops/norm.h semantics). x f32 or bf16 (any strides;
// non-contiguous inputs are copied first), weight/bias f32 or bf16 or undefined; the result has
// x's dtype. One block per row; sums accumulate in f32 (per-thread partial sums, then a tree),
// the row's 1 / sqrt(mean + eps) is formed in double and rounded to f32 like the CPU's; every
// product of the normalisation rounds on its own (no FMA), as on the CPU.
#include "core/tensor.h"

namespace ltx::cuda {

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

}  // namespace ltx::cuda
