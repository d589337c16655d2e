#pragma once
// The reference's fp8-cast policy (ltx-core quantization/fp8_cast.py), for the transformer only:
//  * which Linears: those under "transformer_blocks." whose module names end in .to_q, .to_k,
//    .to_v, .to_out.0, ff.net.0.proj or ff.net.2 (the FF suffixes have no leading dot, so they
//    catch audio_ff too; to_gate_logits, the connectors' transformer_1d_blocks, the AdaLN and
//    projection Linears stay as they are);
//  * storage: their weight AND bias cast to float8_e4m3fn (c10's round-to-nearest-even, |x| past
//    the largest finite value to NaN, core/dtype_bits.h), upcast to the activation dtype at each
//    forward (nn::Linear, LinearFormat::Fp8Cast);
//  * pre-quantised FP8 files: every "<param>_scale" sibling (scalar) is folded first,
//    bf16(f32(param) * scale), and dropped; the folded value is then cast as above when the Linear
//    is selected, else kept (converted to the compute dtype like any dense weight);
//  * LoRA: delta added to the dequantised e4m3 weight in bf16, then cast back to e4m3
//    (lora/fuse.h, the reference's deterministic path).
#include <functional>
#include <string>

#include "io/weights.h"

namespace ltx::quantization {

// True when `module_name` (a Linear's full name in the transformer, e.g.
// "transformer_blocks.3.audio_ff.net.2") is one the policy stores in e4m3.
bool is_fp8_cast_linear(const std::string& module_name);

// True when the parameter `param_name` ("<module>.weight" / "<module>.bias") is stored in e4m3.
bool is_fp8_cast_parameter(const std::string& param_name);

// Which parameters ("<module>.weight") keep their scale unfolded, for their Linear to bind as
// stored (nn::LoadOptions::keep_fp8_linears); empty: none.
using KeepScale = std::function<bool(const std::string& param)>;

// Folds every scalar "<name>.weight_scale" / "<name>.bias_scale" of `w` into "<name>.weight" /
// "<name>.bias" as bf16(f32(param) * scale) (a CPU tensor that replaces the file's) and marks the
// scales used, except the weight scales of the parameters `keep` names; ".input_scale" entries,
// which only the scaled GEMM consumes, are marked used. Call on the map before anything binds it
// (the transformer's LoRA fuser included). Throws naming `file` for a scale that is not a scalar
// (blockwise FP8, NVFP4) or has no parameter beside it.
void fold_prequant_scales(io::WeightMap& w, const std::string& file, const KeepScale& keep = {});

}  // namespace ltx::quantization
