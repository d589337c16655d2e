#pragma once
// The reference's blockwise FP8 policy (ltx-core quantization/blockwise, build_fp8_policy), for
// the transformer only:
//  * which Linears: every one whose full name contains "transformer_block" (the blocks' attention
//    projections and feed-forwards, audio and cross-modal ones included), except those whose
//    name contains one of the reference's excluded substrings (in the blocks: to_gate_logits;
//    the list also names the top-level projections and AdaLN Linears, outside the blocks);
//  * storage: weight float8_e4m3fn in 128 x 128 tiles with an f32 weight_scale
//    [out/128, in/128] (ops::quantize_fp8_blockwise), bias kept in the compute dtype (the
//    reference widens it to f32, exact for a bf16 checkpoint's bias);
//  * pre-quantised files: a Linear stored F8_E4M3 with a 2-D ".weight_scale" beside it is used
//    as stored (the reference's key names; its quantise op leaves FP8 weights alone);
//  * GEMM: ops::linear_fp8_blockwise (activations per token and 128 inputs);
//  * LoRA: ops::fuse_delta_fp8_blockwise (fuse_rule_fp8: bf16 dequantise, add, quantise again).
// Differences from the reference: its fused Triton kernels quantise some activations straight
// out of the AdaLN / RMSNorm (skipping the bf16 rounding of the normalised value); ours quantise
// the bf16 activation the block computes. Dims that are not multiples of 128 (the reference
// asserts) end in one shorter tile, which only the tiny test models have.
#include <string>

#include "io/weights.h"

namespace ltx::quantization {

// True when the Linear `module_name` (full name in the transformer, e.g.
// "transformer_blocks.3.audio_ff.net.2") is one the policy stores blockwise.
bool is_fp8_blockwise_linear(const std::string& module_name);

// True when `w` holds `<name>.weight` as F8_E4M3 with a 2-D `<name>.weight_scale` beside it (a
// blockwise FP8 checkpoint's layer).
bool file_has_fp8_blockwise(const io::WeightMap& w, const std::string& name);

}  // namespace ltx::quantization
