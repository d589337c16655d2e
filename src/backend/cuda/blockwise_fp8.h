#pragma once
// Blockwise FP8 on CUDA (ops/quantized_linear.h's rules; the quantisations bit for bit the CPU's,
// backend/cpu/blockwise_fp8.h), the GEMM through cuBLASLt's block scaling on Hopper.
#include "core/tensor.h"
#include "op_types/quantized_linear.h"

namespace ltx::cuda {

// As cpu::tile_amax / quantize_e4m3_tiles / dequantize_e4m3_tiles / quantize_e4m3_groups.
Tensor tile_amax(const Tensor& w);
ops::Fp8Blockwise quantize_e4m3_tiles(const Tensor& w, const Tensor& amax);
Tensor dequantize_e4m3_tiles(const Tensor& weight, const Tensor& scale, DType dtype);
ops::Fp8PerGroup quantize_e4m3_groups(const Tensor& x);

// ops::linear_fp8_blockwise without the bias rule: y [..., out] in out_dtype (bf16 or f32).
// weight contiguous [out, in] (dims that are not multiples of 128 are zero-padded to whole tiles
// for the GEMM, a copy per call); w_scales f32
// [ceil(out / 128), ceil(in / 128) rounded up to a multiple of 4] contiguous (the padding never
// read); bias undefined or contiguous [out] of out_dtype. Throws unless the GPU is a Hopper
// (sm_90), naming the modes that run elsewhere.
Tensor linear_fp8_blockwise(const Tensor& x, const Tensor& weight, const Tensor& w_scales,
                            const Tensor& bias, DType out_dtype);

}  // namespace ltx::cuda
