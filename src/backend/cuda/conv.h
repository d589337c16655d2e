#pragma once
// CUDA convolutions (arguments checked by ltx::ops, src/ops/conv.cpp). Forward convs are im2col
// tiles (a kernel writes [positions, C/groups * taps] in the compute dtype) followed by one
// cuBLASLt GEMM per (batch, group, tile) through cuda::linear, fp32 accumulation: bf16 when input
// and weight are bf16, else a full f32 GEMM (no TF32). There is no transposed kernel: ops/conv.cpp
// runs a transposed conv as the equivalent forward conv of the zero-inserted, padded input with
// the flipped, transposed weight.
// The output dtype is bf16 when every float operand is bf16, else f32 (ops::float_result_dtype).
#include "core/tensor.h"
#include "op_types/conv.h"

namespace ltx::cuda {

// x [N, C, *spatial], w [O, C / groups, *kernel], bias [O] or undefined.
Tensor conv_nd(const Tensor& x, const Tensor& w, const Tensor& bias, const ops::ConvSpec& spec);

}  // namespace ltx::cuda
