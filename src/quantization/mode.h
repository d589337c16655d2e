#pragma once
// The quantization modes of `--quantization` (the reference's QuantizationKind names, ltx-pipelines
// utils/quantization_factory.py): how the transformer's Linear weights are stored and multiplied.
#include <string>
#include <string_view>

namespace ltx::quantization {

enum class Mode {
  None,     // weights as the file stores them, widened to the compute dtype (bf16 / f32)
  Fp8Cast,  // fp8_cast.h: selected Linears stored float8_e4m3fn, upcast at each forward
  // fp8_scaled_mm.h: the checkpoint's FP8 Linears (e4m3 weight + per-tensor weight_scale and
  // input_scale) multiplied by FP8 GEMMs with a static activation scale
  Fp8ScaledMm,
  // fp8_scaled_mm.h: ours; fp8-cast's Linears quantised per tensor at load, activations per token
  Fp8,
  Nvfp4Cast,      // nvfp4.h: the video branch's 12 Linears a block quantised to NVFP4 at load
  Nvfp4Prequant,  // nvfp4.h: the NVFP4 Linears of a pre-quantised file, kept packed
  // fp8_blockwise.h: the reference's blockwise FP8 policy (ltx-core quantization/blockwise,
  // build_fp8_policy; Python API only there): every Linear inside the transformer blocks but the
  // gate logits, weights in 128 x 128 e4m3 tiles (from a blockwise file, or quantised at load),
  // activations quantised per token and 128 inputs, FP8 GEMMs with per-tile f32 scales
  Fp8Blockwise,
};

// True for the two NVFP4 modes.
inline bool is_nvfp4(Mode mode) { return mode == Mode::Nvfp4Cast || mode == Mode::Nvfp4Prequant; }

// "none", "fp8-cast", "fp8-scaled-mm", "fp8", "nvfp4-cast", "nvfp4-prequant", "fp8-blockwise".
const char* mode_name(Mode mode);

// The mode named `text`. Throws an ltx::Error naming `flag` for an unknown name, listing the
// available ones.
Mode parse_mode(std::string_view text, std::string_view flag = "--quantization");

// "none, fp8-cast, fp8-scaled-mm, fp8, nvfp4-cast, nvfp4-prequant, fp8-blockwise": the names
// parse_mode accepts.
std::string available_modes();

}  // namespace ltx::quantization
