#pragma once
// NVFP4 weight quantisation and dequantisation on the CPU: the reference implementation of
// op_types/nvfp4.h's rules for the CUDA tests (arguments checked by ops/nvfp4.cpp).
#include "core/tensor.h"
#include "op_types/nvfp4.h"

namespace ltx::cpu {

// weight: f32, contiguous, [out, in] with in a multiple of 16.
ops::Nvfp4Weight quantize_nvfp4(const Tensor& weight);

// The dense [out, in] weight in `dtype` (bf16 or f32): each element decoded in f32, then rounded.
Tensor dequantize_nvfp4(const ops::Nvfp4Weight& w, DType dtype);

}  // namespace ltx::cpu
