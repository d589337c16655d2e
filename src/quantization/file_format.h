#pragma once
// What kind of quantized checkpoint a safetensors file is, read from its header alone, and which
// `--quantization` modes can load it. The forms the reference writes and reads:
//   dense          Linear weights bf16 / f16 / f32
//   FP8 per-tensor ".weight" F8_E4M3 + scalar ".weight_scale" (+ ".input_scale"): fp8-scaled-mm's
//                  input, also readable by fp8-cast (the scales folded in)
//   FP8, no scales ".weight" F8_E4M3 alone (an fp8-cast state dict saved as is)
//   blockwise FP8  ".weight" F8_E4M3 + ".weight_scale" f32 [out/128, in/128] (ltx-core
//                  quantization/blockwise; Python API only in the reference): fp8-blockwise's
//   NVFP4          ".weight" U8 (two values a byte) + ".weight_scale" F8_E4M3 block scales +
//                  ".weight_scale_2" f32 (nvfp4-prequant's input)
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "quantization/mode.h"

namespace ltx::quantization {

enum class FileFormat { Dense, Fp8PerTensor, Fp8NoScales, Fp8Blockwise, Nvfp4 };

struct FileQuantization {
  FileFormat format = FileFormat::Dense;
  int64_t dense_weights = 0;      // 2-D floating ".weight" tensors that are not FP8
  int64_t fp8_per_tensor = 0;     // F8_E4M3 weights with a scalar weight_scale
  int64_t fp8_input_scales = 0;   // of those, with an input_scale
  int64_t fp8_unscaled = 0;       // F8_E4M3 weights without a scale
  int64_t fp8_blockwise = 0;      // F8_E4M3 weights with a 2-D weight_scale
  int64_t nvfp4 = 0;              // U8 weights with weight_scale and weight_scale_2
};

FileQuantization inspect_file(const io::SafetensorsFile& file);

// "FP8 per-tensor scaled", "dense (bf16 / f32)", ...
const char* format_name(FileFormat format);
// One line: the format with its layer counts, e.g. "FP8 per-tensor scaled: 48 Linear weights
// F8_E4M3 with weight_scale (48 with input_scale), 12 dense".
std::string describe(const FileQuantization& q);

// The reference's --quantization names that load a file of `format` ("none" included where the
// weights are usable as stored), whether or not this build implements them.
std::vector<std::string> fitting_modes(FileFormat format);

// Throws a one-line ltx::Error naming `path`, its format and the modes that fit when `mode`
// cannot load it (an FP8 per-tensor file without a quantization mode, NVFP4 under fp8-cast, ...).
void check_mode_fits(const io::SafetensorsFile& file, Mode mode);
// The same for a file by path: safetensors as above; a GGUF file's block-quantized layers are
// used as stored, so it takes --quantization none only (the error names the file and its types).
void check_mode_fits(const std::string& path, Mode mode);

}  // namespace ltx::quantization
