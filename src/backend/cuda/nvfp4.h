#pragma once
// NVFP4 weight quantisation and dequantisation on CUDA (arguments checked by ops/nvfp4.cpp; the
// rules are op_types/nvfp4.h's, bit for bit those of backend/cpu/nvfp4.h).
#include "core/tensor.h"
#include "op_types/nvfp4.h"

namespace ltx::cuda {

// weight: bf16 or f32 [out, in] with in a multiple of 16 (any strides). The per-tensor amax is
// reduced on the device; no host synchronisation.
ops::Nvfp4Weight quantize_nvfp4(const Tensor& weight);

// The dense [out, in] weight in `dtype` (bf16 or f32); one thread per 16-element block.
Tensor dequantize_nvfp4(const ops::Nvfp4Weight& w, DType dtype);

}  // namespace ltx::cuda
