#pragma once
// Writing checkpoints in other storage: `ltx quantize` (GGUF files as the community makes them,
// or the official FP8 safetensors layout) and `ltx convert` (between GGUF and safetensors where
// nothing is lost, or with --allow-lossy). Tensors are read, converted and written one at a time
// (inputs are mapped; the largest tensor is the memory high-water mark), the output is checked
// against the free disk space before any work and written to a temporary name renamed at the end.
//
// GGUF outputs (the layout ComfyUI-GGUF's loader takes): the transformer only, names without
// "model.diffusion_model." (a single-file checkpoint's VAEs, vocoder and text projection are left
// out and reported), per-tensor types from quantization/gguf_policy.h, metadata
// general.architecture "ltxv", general.quantization_version 2, general.file_type, and the input's
// safetensors metadata (config, model_version) as strings.
// FP8 output (`--type fp8`): every tensor of the input as it is, except the Linears the fp8-cast
// policy picks (quantization/fp8_cast.h), whose ".weight" becomes e4m3 with an f32 0-d
// ".weight_scale" beside it (ops::quantize_fp8_per_tensor: the reference's
// quantize_weight_to_fp8_per_tensor). No ".input_scale" (that needs calibration on activations):
// --quantization fp8-cast and fp8 load the file, fp8-scaled-mm does not.
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace ltx::quantization {

struct ExportTypeCount {
  int64_t tensors = 0;
  int64_t params = 0;
  uint64_t bytes = 0;
};

struct ExportSummary {
  std::string output;
  std::string format;  // "GGUF" or "safetensors"
  std::string target;  // "Q4_K_M", "fp8", "gguf-bf16", "safetensors", ...
  uint64_t file_bytes = 0;
  int64_t tensors = 0;
  int64_t params = 0;
  std::map<std::string, ExportTypeCount> types;  // storage type name ("Q4_K", "BF16", "F8_E4M3")
  double bits_per_weight = 0;                    // 8 * tensor bytes / params
  int64_t source_tensors = 0;
  uint64_t source_bytes = 0;  // the input files' sizes
  int64_t left_out = 0;       // input tensors the output does not hold
  std::vector<std::string> notes;
};

// After each written tensor: tensors done and in all, bytes of input tensors read and in all.
using ExportProgress = std::function<void(int64_t, int64_t, uint64_t, uint64_t)>;

struct QuantizeOptions {
  std::vector<std::string> inputs;  // safetensors (several: one checkpoint split over files) or GGUF
  std::string type;                 // parse_gguf_quant_type's names, or "fp8"
  std::string output;
  bool overwrite = false;  // else an existing output is an error
  ExportProgress progress;
};

// Throws a one-line ltx::Error (unknown type, unreadable or unsuitable input, output exists or is
// an input, not enough disk, a tensor with NaN / inf values to quantise) before writing anything,
// or removes the partial output when writing fails.
ExportSummary quantize_checkpoint(const QuantizeOptions& options);

enum class ConvertTarget { Gguf, GgufBf16, GgufF16, Safetensors };
// "gguf", "gguf-bf16", "gguf-f16", "safetensors"; nullopt otherwise.
std::optional<ConvertTarget> parse_convert_target(const std::string& name);
const char* convert_target_name(ConvertTarget target);

struct ConvertOptions {
  std::vector<std::string> inputs;
  ConvertTarget target = ConvertTarget::Safetensors;
  std::string output;
  // Safetensors output: the dtype GGUF block-quantized tensors are dequantised to (bf16 or f32;
  // f32 holds ggml's dequantised values exactly).
  DType dequantize_to = DType::BF16;
  bool allow_lossy = false;  // else a conversion that can change a value is refused up front
  bool overwrite = false;
  ExportProgress progress;
};

// `gguf`: every tensor in its own type (GGUF blocks copied as they are); `gguf-bf16` /
// `gguf-f16`: convert.py's first stage (1-D, small and scale_shift_table tensors F32, the rest
// BF16 / F16); `safetensors`: dense tensors in their own dtype, GGUF blocks dequantised
// (`dequantize_to`), bare LTX transformer names given back their "model.diffusion_model.".
// Lossless conversions: same type, or to F32 from anything. Every other one (F32 -> BF16 / F16,
// BF16 <-> F16, blocks -> BF16) can change values and needs allow_lossy.
ExportSummary convert_checkpoint(const ConvertOptions& options);

nlohmann::ordered_json to_json(const ExportSummary& summary);
// A few lines: output, size, tensors per type, bits per weight, what was left out.
std::string to_text(const ExportSummary& summary);

}  // namespace ltx::quantization
