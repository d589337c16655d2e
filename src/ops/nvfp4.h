#pragma once
// NVFP4 weights (op_types/nvfp4.h states the layout): the quantiser of the reference's nvfp4-cast
// mode and the dequantiser every NVFP4 Linear runs before its GEMM.
//
// The reference (ltx-kernels, Blackwell only) multiplies NVFP4 weights by NVFP4 activations on
// FP4 tensor cores: each forward quantises the activations to E2M1 with per-16 E4M3 block scales
// and a per-tensor decode scale (1, or the checkpoint's input_scale), and scales the product by
// alpha = weight_scale_2 (* input_scale). Hopper has no FP4 tensor cores, so here the weight is
// dequantised to the compute dtype (bf16 on CUDA, f32 on the CPU) at each forward and multiplied
// by the activations as they are, in the ordinary GEMM. The weights are bit for bit the
// reference's; the activations are not rounded to FP4, so the outputs are closer to bf16 than the
// reference's Blackwell outputs are.
#include <string>

#include "core/tensor.h"
#include "op_types/nvfp4.h"

namespace ltx::ops {

// The reference's quantize_bf16_weight_to_nvfp4 (convert.py with quantize.cu): tensor_scale =
// amax|W| * f32(1 / 2688) (NaN skipped, inf as the largest float); per 16-element block, scale =
// e4m3(min((amax_block / 6) / tensor_scale, 448)) (round to nearest even); each element
// e2m1(w * (1 / (tensor_scale * scale))), nearest with ties to even, saturated at 6.
// weight: bf16 or f32 [out, in], `in` a multiple of 16, on any device; the result is there too.
// The reference quantises the bf16 weight: pass a bf16 weight (or f32 values that are bf16's) to
// reproduce its bits.
Nvfp4Weight quantize_nvfp4(const Tensor& weight);

// The dense [out, in] weight in `dtype` (bf16 or f32): each element decoded in f32 as
// e2m1 * (tensor_scale * e4m3(block scale)), then rounded to `dtype`. The three tensors must
// have the shapes and dtypes op_types/nvfp4.h gives and share a device.
Tensor dequantize_nvfp4(const Nvfp4Weight& w, DType dtype);

// Throws naming `what` (e.g. "transformer_blocks.0.attn1.to_q") unless `w` is a well-formed NVFP4
// weight of [out, in]: packed u8 [out, in/2], block_scales float8_e4m3fn
// [roundup(out,128), roundup(in/16,4)], tensor_scale f32 with one element, in a multiple of 16.
void check_nvfp4_weight(const Nvfp4Weight& w, int64_t out, int64_t in, const std::string& what);

}  // namespace ltx::ops
