#pragma once
// FP8 linear layers with per-tensor scales: the reference's fp8-scaled-mm mode (ltx-core
// quantization/fp8_scaled_mm.py, FP8Linear and quantize_weight_to_fp8_per_tensor).
//
// Rounding follows torch exactly on the CPU (the reference for the CUDA tests):
//   - the multiplier m (1 / input_scale, or 448 / amax) is computed in f32; for a bf16 input it is
//     rounded to bf16 first (torch casts the f32 0-d scale to the bf16 tensor's dtype), and the
//     product x * m is rounded to x's dtype;
//   - the product is clamped to [-448, 448] (NaN stays NaN, +-inf becomes +-448) and cast to
//     float8_e4m3fn, rounding to nearest even (core/dtype_bits.h);
//   - the GEMM multiplies e4m3 values (exact in f32) and sums them in f32; the sum is multiplied by
//     input_scale * weight_scale and rounded to x's dtype; a bias is then rounded to that dtype
//     and added there (a second rounding, as `output + bias.to(output.dtype)` does).
// On CUDA the GEMM is cuBLASLt's FP8 GEMM with fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM,
// torch._scaled_mm's use_fast_accum=True: Hopper's FP8 tensor cores keep partial sums in reduced
// precision between promotions), and a bf16 bias is added to the scaled f32 result in the
// epilogue before the one rounding to bf16; both differ from the CPU by bf16 rounding steps
// (tests/cuda/quantized_linear_test.cpp states the bound). The activation quantisation is bit
// for bit the CPU's on both backends.
#include <string>

#include "core/tensor.h"
#include "op_types/quantized_linear.h"

namespace ltx::ops {

// FP8Linear.forward: y = (e4m3(clamp(x / input_scale)) @ weight^T) * input_scale * weight_scale
// (+ bias), rounded as described above.
//   x            [..., in] bf16 or f32 (the output's dtype); any strides
//   weight       [out, in] float8_e4m3fn (torch layout)
//   weight_scale, input_scale: f32 with one element (0-d or [1]), on x's device
//   bias         [out] bf16 or f32, or an undefined Tensor for none
// On the CPU both scales are checked to be finite and > 0 (a zero input_scale would turn every
// activation into +-448 or NaN). On CUDA reading them would wait for the device on every call,
// so the loader checks them once with check_fp8_scale. CUDA also needs in and out to be
// multiples of 16 (cuBLASLt's FP8 layout rule; every layer of the LTX-2.x transformers is).
Tensor linear_fp8_scaled(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                         const Tensor& input_scale, const Tensor& bias = Tensor());

// The activation quantisation alone: e4m3(clamp(x * (1 / input_scale), -448, 448)), x bf16 or
// f32, any shape and strides -> a contiguous float8_e4m3fn tensor of x's shape.
Tensor quantize_fp8(const Tensor& x, const Tensor& input_scale);

// quantize_weight_to_fp8_per_tensor: scale = 448 / amax|weight| (in f32), weight_e4m3 =
// e4m3(clamp(f32(weight) * scale, -448, 448)), weight_scale = 1 / scale. Any float dtype, shape
// and device (the amax is read back to the host once). Also the requantisation of LoRA fusion
// under fp8-scaled-mm (docs/reference-map.md 1.6). A weight that is all zeros or holds
// NaN / inf is an error: the reference's rule would turn it into NaN.
Fp8PerTensor quantize_fp8_per_tensor(const Tensor& weight);

// The fp8-scaled-mm LoRA fusion rule (the reference's _fp8_scaled_mm_fuse): the weight
// dequantised in f32 (f32(weight) * weight_scale), plus the delta (any float dtype, the weight's
// shape) in f32, quantised again with quantize_fp8_per_tensor: a fresh scale.
Fp8PerTensor fuse_delta_fp8_per_tensor(const Tensor& weight, const Tensor& weight_scale,
                                       const Tensor& delta);

// Our own FP8 mode (not the reference's): per-token activation scales computed on the fly, for
// activations whose rows differ in magnitude, where one static input_scale leaves the small rows
// to e4m3's subnormals. Per row r of x: amax_r = max |x_r| over the finite values, q_r =
// e4m3(clamp(x_r * (448 / amax_r), -448, 448)) with the product in f32 (no rounding to x's
// dtype), row_scale_r = amax_r / 448 (both 1 for a row without a finite non-zero value; NaN
// stays NaN, +-inf becomes +-448).
Fp8PerToken quantize_fp8_per_token(const Tensor& x);
// y_r = round(round(q_r @ W^T * weight_scale) * row_scale_r + bias), round = to x's dtype: the
// GEMM's output is rounded once (as cuBLASLt writes it), then scaled per row with the bias added
// in f32 and rounded again. Arguments as linear_fp8_scaled's without input_scale; the same
// CUDA layout rules (in, out multiples of 16).
Tensor linear_fp8_per_token(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias = Tensor());

// Blockwise FP8, the reference's blockwise policy (ltx-core quantization/blockwise with the
// ltx-kernels GEMM: DeepGEMM's sm90 "1d2d" kernel). Rounding on the CPU (the reference for CUDA):
//   - weights, per 128 x 128 tile: m = 448 / amax|tile| (f32 division), q = e4m3(f32(w) * m)
//     (torch's cast: the product never passes 448 by more than a rounding step, so no clamp
//     is needed), scale = 1 / m. A tile that is all zeros or holds NaN / inf is an error: the
//     reference's rule turns it into NaN (0 * inf).
//   - activations, per token and group of 128 input features: the same m from the group's
//     amax, the product in f32 (no rounding to x's dtype), cast with saturation to +-448 as
//     Triton's float8e4nv conversion does (NaN stays NaN), scale = 1 / m. The amax is taken
//     over finite values, and a group with no finite non-zero value gets m = scale = 1 (the
//     reference would compute 448 / 0 = inf and turn the group into NaN; a zero group must
//     contribute zero).
//   - the product: per output (r, o), sum over the input groups g of
//     (group_scale[r, g] * weight_scale[o / 128, g]) * P_g, where P_g sums the exact e4m3
//     products of group g in f32 (the tensor cores' per-128 partial sum, promoted and scaled
//     in f32 as DeepGEMM does); then the bias added in f32 and the sum rounded to x's dtype
//     once (the reference's kernel takes an f32 bias and writes bf16).
// On CUDA the GEMM is cuBLASLt's block-scaled FP8 GEMM (Hopper: VEC128 activation scales,
// BLK128x128 weight scales, no fast accumulation), the bias added in its bf16 epilogue; the
// quantisations are bit for bit the CPU's.

// The weight's tiles (any float dtype, 2-D, on the CPU or CUDA); throws for a tile the rule
// cannot quantise, naming the tile.
Fp8Blockwise quantize_fp8_blockwise(const Tensor& weight);
// f32(weight) * its tile's scale, rounded to `dtype` (the reference's blockwise_dequantize, bf16).
Tensor dequantize_fp8_blockwise(const Tensor& weight, const Tensor& weight_scale, DType dtype);
// The activations' groups: x bf16 or f32 [..., in], any strides.
Fp8PerGroup quantize_fp8_per_group(const Tensor& x);
// y = x W^T (+ bias) as above: x bf16 or f32 [..., in] (its dtype is the output's), weight
// float8_e4m3fn [out, in], weight_scale f32 [ceil(out / 128), ceil(in / 128)], bias [out] bf16
// or f32 or undefined. CUDA: a Hopper GPU (sm_90).
Tensor linear_fp8_blockwise(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias = Tensor());
// The reference's LoRA fusion for blockwise FP8 (fuse_rule_fp8): the weight dequantised to bf16,
// plus the delta rounded to bf16 (the sum in bf16), quantised again per tile.
Fp8Blockwise fuse_delta_fp8_blockwise(const Tensor& weight, const Tensor& weight_scale,
                                      const Tensor& delta);

// Throws unless `scale` is an f32 one-element tensor holding a finite value > 0; `what` names
// it in the message (e.g. "transformer_blocks.0.attn1.to_q.input_scale"). Reads the value back
// from a CUDA device (one wait): meant for load time.
void check_fp8_scale(const Tensor& scale, const std::string& what);

}  // namespace ltx::ops
