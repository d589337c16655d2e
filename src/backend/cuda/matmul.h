#pragma once
// torch.matmul on CUDA (arguments checked by ltx::ops::matmul): 1-D operands are promoted and
// their dim removed afterwards, batch dims broadcast; each product is a cuBLASLt GEMM through
// cuda::linear (fp32 accumulation; bf16 when both operands are bf16, else a full f32 GEMM).
#include "core/tensor.h"

namespace ltx::cuda {

Tensor matmul(const Tensor& a, const Tensor& b);

}  // namespace ltx::cuda
