#pragma once
// Dense linear layers on CUDA through cuBLASLt (one handle per device, algorithm choice cached per
// problem, workspace from the caching allocator, everything on the current stream).
#include "core/tensor.h"

namespace ltx::cuda {

// y = x @ weight^T + bias, the torch.nn.functional.linear contract:
//   x      [..., in]  bf16, or f32 (then rounded to bf16 first, RNE, like autocast does);
//                     any strides as long as the rows can be addressed with one leading
//                     dimension (else a contiguous copy is made);
//   weight [out, in]  bf16 (non-contiguous weights are copied);
//   bias   [out]      bf16 or f32, or an undefined Tensor for none;
//   y      [..., out] bf16, contiguous, on x's device.
// Products accumulate in fp32 (CUBLAS_COMPUTE_32F; split-K partial sums are never reduced in
// bf16); the bias is added to the fp32 accumulator in the cuBLASLt epilogue and the sum is rounded
// to bf16 once. (An f32 bias is applied by an f32 epilogue into an f32 buffer, then rounded to
// bf16: cuBLASLt wants the bias in D's type.)
// All tensors must be on one CUDA device; dtype, shape and device mismatches throw ltx::Error.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

}  // namespace ltx::cuda
