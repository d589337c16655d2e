#include "quantization/file_format.h"

#include <algorithm>
#include <set>
#include <string>

#include "core/error.h"
#include "core/ggml_type.h"
#include "io/gguf.h"

namespace ltx::quantization {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) { return s.ends_with(suffix); }

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

FileQuantization inspect_file(const io::SafetensorsFile& file) {
  FileQuantization q;
  for (const std::string& name : file.names()) {
    if (!ends_with(name, ".weight")) continue;
    const io::TensorInfo& w = file.info(name);
    if (w.shape.size() != 2) continue;
    const std::string scale = name + "_scale";
    const bool has_scale = file.contains(scale);
    if (w.dtype == DType::U8 && has_scale && file.contains(name + "_scale_2")) {
      ++q.nvfp4;
    } else if (w.dtype == DType::F8E4M3FN) {
      if (!has_scale) {
        ++q.fp8_unscaled;
      } else if (file.info(scale).shape.size() == 0) {
        ++q.fp8_per_tensor;
        const std::string stem = name.substr(0, name.size() - std::string(".weight").size());
        if (file.contains(stem + ".input_scale")) ++q.fp8_input_scales;
      } else {
        ++q.fp8_blockwise;
      }
    } else if (dtype_is_floating(w.dtype)) {
      ++q.dense_weights;
    }
  }
  // The most specific form present names the file (a file mixes dense layers with one FP8 form).
  if (q.nvfp4 > 0) {
    q.format = FileFormat::Nvfp4;
  } else if (q.fp8_blockwise > 0) {
    q.format = FileFormat::Fp8Blockwise;
  } else if (q.fp8_per_tensor > 0) {
    q.format = FileFormat::Fp8PerTensor;
  } else if (q.fp8_unscaled > 0) {
    q.format = FileFormat::Fp8NoScales;
  }
  return q;
}

const char* format_name(FileFormat format) {
  switch (format) {
    case FileFormat::Dense: return "dense (no FP8 / NVFP4 weights)";
    case FileFormat::Fp8PerTensor: return "FP8 per-tensor scaled";
    case FileFormat::Fp8NoScales: return "FP8 without scales";
    case FileFormat::Fp8Blockwise: return "blockwise FP8";
    case FileFormat::Nvfp4: return "NVFP4";
  }
  return "?";
}

std::string describe(const FileQuantization& q) {
  std::string s = str(format_name(q.format), ":");
  const auto part = [&s](int64_t n, const std::string& what) {
    if (n > 0) s += str(s.back() == ':' ? " " : ", ", n, " ", what);
  };
  part(q.fp8_per_tensor, str("Linear weights F8_E4M3 with a per-tensor weight_scale (",
                             q.fp8_input_scales, " with input_scale)"));
  part(q.fp8_blockwise, "Linear weights F8_E4M3 with a blockwise weight_scale");
  part(q.fp8_unscaled, "Linear weights F8_E4M3 without a scale");
  part(q.nvfp4, "Linear weights NVFP4 (U8 + weight_scale + weight_scale_2)");
  part(q.dense_weights, "dense 2-D weights");
  if (s.back() == ':') s += " no 2-D weights";
  return s;
}

std::vector<std::string> fitting_modes(FileFormat format) {
  switch (format) {
    case FileFormat::Dense: return {"none", "fp8-cast", "fp8", "nvfp4-cast", "fp8-blockwise"};
    case FileFormat::Fp8PerTensor: return {"fp8-cast", "fp8-scaled-mm", "fp8"};
    case FileFormat::Fp8NoScales: return {"none", "fp8-cast", "fp8"};
    case FileFormat::Fp8Blockwise: return {"fp8-blockwise"};
    case FileFormat::Nvfp4: return {"nvfp4-prequant"};
  }
  return {};
}

void check_mode_fits(const io::SafetensorsFile& file, Mode mode) {
  const FileQuantization q = inspect_file(file);
  if (mode == Mode::Fp8ScaledMm) {
    // The reference's refusal: without FP8 layers the policy would change nothing.
    LTX_CHECK(q.format != FileFormat::Dense && q.format != FileFormat::Fp8NoScales,
              file.path(), " has no F8_E4M3 '.weight' with a '.weight_scale' beside it; "
              "--quantization fp8-scaled-mm needs a pre-quantised FP8 checkpoint (for a bf16 file "
              "use --quantization fp8-cast, or fp8 for FP8 GEMMs)");
    if (q.format == FileFormat::Fp8PerTensor && q.fp8_input_scales < q.fp8_per_tensor)
      for (const std::string& name : file.names()) {
        if (!name.ends_with(".weight_scale")) continue;
        const std::string stem = name.substr(0, name.size() - std::string(".weight_scale").size());
        LTX_CHECK(file.contains(stem + ".input_scale"), file.path(), ": FP8 layer '", stem,
                  "' has a weight_scale but no input_scale, which the static FP8 GEMM of "
                  "--quantization fp8-scaled-mm needs; use --quantization fp8 (activation scales "
                  "computed per token)");
      }
  }
  const std::vector<std::string> fits = fitting_modes(q.format);
  const std::string name = mode_name(mode);
  if (std::find(fits.begin(), fits.end(), name) != fits.end()) return;
  fail(file.path(), " is a ", format_name(q.format), " checkpoint; --quantization ", name,
       " cannot load it, use --quantization ", joined(fits), " (available in this build: ",
       available_modes(), ")");
}

void check_mode_fits(const std::string& path, Mode mode) {
  if (!io::is_gguf_file(path)) return check_mode_fits(io::SafetensorsFile(path), mode);
  if (mode == Mode::None) return;
  const io::GgufFile file(path);
  std::set<std::string> types;
  for (const io::GgufTensorInfo& ti : file.infos())
    if (ggml_is_quantized(ti.type)) types.insert(ggml_type_name(ti.type));
  if (types.empty()) return;  // a dense GGUF file: the modes apply as to safetensors
  std::string listed;
  for (const std::string& t : types) listed += (listed.empty() ? "" : ", ") + t;
  fail(path, " is a GGUF file of GGML-quantized layers (", listed, "), used as stored; --quantization ",
       mode_name(mode), " applies to dense checkpoints only: use --quantization none");
}

}  // namespace ltx::quantization
