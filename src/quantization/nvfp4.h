#pragma once
// The reference's two NVFP4 policies (ltx-core quantization/nvfp4/), for the transformer:
//  * nvfp4-cast: the video branch's 12 Linears of every block, "transformer_blocks.<i>." followed
//    by attn1.{to_q,to_k,to_v,to_out.0}, attn2.{to_q,to_out.0}, audio_to_video_attn.{to_q,to_out.0},
//    video_to_audio_attn.{to_k,to_v}, ff.net.0.proj or ff.net.2 (exactly: audio_attn1, audio_ff,
//    to_gate_logits, the AdaLN and projection Linears stay dense), have their bf16 weight quantised
//    at load (ops::quantize_nvfp4) and kept packed; biases stay in the compute dtype;
//  * nvfp4-prequant: every Linear whose file entry has both ".weight_scale" and ".weight_scale_2"
//    is loaded as stored (packed weight u8, swizzled E4M3 block scales, f32 decode scale); the
//    optional ".input_scale" (the activations' calibrated FP4 scale on Blackwell) is read and kept
//    with the layer but unused on Hopper, where activations stay bf16 (ops/nvfp4.h says why);
//    other Linears load densely;
//  * both: each forward dequantises the weight to the compute dtype, then runs the ordinary GEMM
//    (nn::Linear, LinearFormat::Nvfp4).
//  * LoRA: the reference dequantises, adds the delta and quantises again; not implemented here
//    (lora/fuse.cpp refuses LoRAs under the NVFP4 modes).
#include <cstdint>
#include <optional>
#include <string>

#include "core/device.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "op_types/nvfp4.h"
#include "quantization/mode.h"

namespace ltx::quantization {

// True when `module_name` (a Linear's full name, e.g. "transformer_blocks.3.attn1.to_q") is one
// of the 12 nvfp4-cast quantises.
bool is_nvfp4_cast_linear(const std::string& module_name);

// A Linear's NVFP4 tensors, as Linear::load binds them.
struct Nvfp4Parameters {
  ops::Nvfp4Weight weight;
  Tensor input_scale;  // f32 0-d, or undefined when the file has none (never used on Hopper)
};

// nvfp4-prequant: the NVFP4 tensors of the Linear `name` ([out, in]) of `w` on `device`, or
// nullopt when the file stores that Linear densely (no ".weight_scale" / ".weight_scale_2").
// Throws a one-line error naming the layer for a half pair of scales, or a weight / scale of the
// wrong dtype or shape.
std::optional<Nvfp4Parameters> take_prequant_nvfp4(io::WeightMap& w, const std::string& name,
                                                   int64_t in_features, int64_t out_features,
                                                   Device device);

// nvfp4-cast: the Linear `name`'s weight ([out, in]) taken from `w` as bf16 (the dtype the
// reference quantises), quantised on `device`. Throws naming the layer when `in` is not a multiple
// of 16.
ops::Nvfp4Weight take_cast_nvfp4(io::WeightMap& w, const std::string& name, int64_t in_features,
                                 int64_t out_features, Device device);

// The bytes an [out, in] weight takes as an NVFP4 Linear holds it: the packed E2M1 pairs, the
// padded E4M3 block scales and the f32 decode scale (about 0.5625 bytes a weight).
int64_t nvfp4_weight_bytes(int64_t out_features, int64_t in_features);

// The memory estimates' view of the NVFP4 modes: the bytes the transformer tensor `info` of `file`
// takes once nn::Linear has bound it, when `mode` makes it part of an NVFP4 layer (nvfp4-cast: the
// 12 Linears' weights at nvfp4_weight_bytes; nvfp4-prequant: the file's NVFP4 layers' tensors as
// stored). `name` is info.name without the file's "model.diffusion_model." prefix. nullopt for any
// other tensor or mode: it loads as the dense model's does.
std::optional<int64_t> nvfp4_loaded_bytes(const io::SafetensorsFile& file,
                                          const io::TensorInfo& info, const std::string& name,
                                          Mode mode);

}  // namespace ltx::quantization
