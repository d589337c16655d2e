#include "quantization/fp8_cast.h"

#include <array>
#include <string_view>

#include "core/error.h"
#include "ops/elementwise.h"

namespace ltx::quantization {

namespace {

constexpr std::string_view kFp8BlocksPrefix = "transformer_blocks.";
// One list for the matcher and for the parameters, as the reference keeps them.
constexpr std::array<std::string_view, 6> kLinearSuffixes = {
    ".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2"};

bool strip_suffix(std::string_view& s, std::string_view suffix) {
  if (!s.ends_with(suffix)) return false;
  s.remove_suffix(suffix.size());
  return true;
}

}  // namespace

bool is_fp8_cast_linear(const std::string& module_name) {
  if (module_name.find(kFp8BlocksPrefix) == std::string::npos) return false;
  for (std::string_view suffix : kLinearSuffixes)
    if (std::string_view(module_name).ends_with(suffix)) return true;
  return false;
}

bool is_fp8_cast_parameter(const std::string& param_name) {
  std::string_view module = param_name;
  if (!strip_suffix(module, ".weight") && !strip_suffix(module, ".bias")) return false;
  return is_fp8_cast_linear(std::string(module));
}

void fold_prequant_scales(io::WeightMap& w, const std::string& file, const KeepScale& keep) {
  for (const std::string& name : w.names()) {
    std::string_view param = name;
    if (strip_suffix(param, ".input_scale")) {
      w.ignore(name);
      continue;
    }
    if (!name.ends_with(".weight_scale") && !name.ends_with(".bias_scale")) continue;
    strip_suffix(param, "_scale");
    const std::string target(param);
    if (keep && name.ends_with(".weight_scale") && w.contains(target) && keep(target)) continue;
    LTX_CHECK(w.contains(target), file, ": scale '", name, "' has no parameter '", target,
              "' beside it; the file is not a pre-quantised FP8 checkpoint that fp8-cast can read");
    const Tensor scale = w.take_any_shape(name, DType::F32);
    LTX_CHECK(scale.dim() == 0, file, ": scale '", name, "' has shape ", scale.shape().str(),
              "; fp8-cast folds per-tensor (scalar) scales only (blockwise FP8 and NVFP4 files are "
              "read by other modes; see ltx inspect)");
    const Tensor value = w.take_any_shape(target, DType::F32);
    w.add(target, ops::mul(value, scale).to(DType::BF16));
  }
}

}  // namespace ltx::quantization
