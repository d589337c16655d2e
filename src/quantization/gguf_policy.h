#pragma once
// Which GGML type each tensor of an LTX transformer gets in a GGUF file, as the community files
// are made (ComfyUI-GGUF's tools/convert.py, then llama.cpp's llama-quantize with ComfyUI-GGUF's
// tools/lcpp.patch, arch "ltxv"). Names are the bare transformer names ComfyUI-GGUF writes
// ("transformer_blocks.0.attn1.to_q.weight", without "model.diffusion_model.").
//
// For a quantized target, in order:
//  1. F32: 1-D tensors, tensors of at most 1024 values, and every "scale_shift_table" (convert.py's
//     rule: biases, norms, the AdaLN tables stay exact);
//  2. the source's dense type (BF16 for the published checkpoints): names containing
//     "adaln_single.", "caption_projection.", "patchify_proj." or "proj_out." (every timestep /
//     AdaLN embedding, the caption projection and the input / output projections, audio ones
//     included: lcpp.patch's LTXV list), tensors that are not 2-D, names that do not end in
//     "weight" (llama-quantize quantises weights only: the connectors' learnable_registers stay),
//     and rows that are not a whole number of the target's blocks;
//  3. the *_K_M mixes: ".to_v.weight" and "ff.net.2.weight" (audio_ff too) one step up, to Q6_K
//     (lcpp.patch's rules for Q4_K_M and Q5_K_M);
//  4. the target type.
// Where ltx differs from the community tools: a tensor rule 2 keeps dense stays in the source's
// own type (convert.py turns F32 sources into F16, and lcpp.patch falls back to F16 for rows that
// do not fit the K blocks; ltx never rounds a tensor it does not quantise).
// For a dense target (BF16 / F16: convert.py's first stage) rule 1 applies, then the target.
#include <cstdint>
#include <optional>
#include <string>

#include "core/ggml_type.h"
#include "core/shape.h"

namespace ltx::quantization {

// A `--type` of `ltx quantize` (GGUF): the base type, whether it is a *_K_M mix, and the
// general.file_type value (llama.cpp's LLAMA_FTYPE_MOSTLY_*) the file records.
struct GgufQuantType {
  std::string name;  // "Q4_K", "Q4_K_M", "Q8_0", "BF16", ...
  GgmlType base = GgmlType::Q8_0;
  bool k_m_mix = false;
  uint32_t file_type = 0;
};

// Q8_0, Q6_K, Q5_K (= Q5_K_S), Q5_K_M, Q4_K (= Q4_K_S), Q4_K_M, Q5_0, Q4_0, BF16, F16
// (case-insensitive); nullopt for anything else.
std::optional<GgufQuantType> parse_gguf_quant_type(const std::string& name);
// "Q8_0, Q6_K, Q5_K, ..." (for messages and --help).
std::string gguf_quant_type_names();

// The GGML type of one tensor: `name` bare (see above), `shape` its PyTorch shape, `source` the
// type it is stored in now (F32 / F16 / BF16). Non-float sources are the caller's business.
GgmlType community_gguf_type(const std::string& name, const Shape& shape, GgmlType source,
                             const GgufQuantType& target);

// The "model.diffusion_model." prefix of the LTX transformer in the published checkpoints, which
// ComfyUI-GGUF strips.
inline constexpr const char* kTransformerPrefix = "model.diffusion_model.";

}  // namespace ltx::quantization
