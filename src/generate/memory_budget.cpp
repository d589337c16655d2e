#include "generate/memory_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string_view>

#include "backend/device_query.h"
#include "core/error.h"
#include "core/out_of_memory.h"
#include "generate/offload_plan.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "quantization/fp8_blockwise.h"
#include "quantization/fp8_cast.h"
#include "quantization/nvfp4.h"

namespace ltx::generate {

namespace {

namespace fs = std::filesystem;
constexpr int64_t kGiB = int64_t{1} << 30;

// Whether `mode` binds the floating tensor `name` of `file` as e4m3 (the layer choice of
// nn::Linear::load: fp8-cast's policy, the file's FP8 layers with a scale, fp8's union of both).
bool loads_as_e4m3(const io::SafetensorsFile& file, const io::TensorInfo& info,
                   quantization::Mode mode) {
  const bool fp8_with_scale = info.dtype == DType::F8E4M3FN && info.name.ends_with(".weight") &&
                              file.contains(info.name + "_scale");
  switch (mode) {
    case quantization::Mode::None: return false;
    case quantization::Mode::Fp8Cast: return quantization::is_fp8_cast_parameter(info.name);
    case quantization::Mode::Fp8ScaledMm: return fp8_with_scale;
    case quantization::Mode::Fp8:
      return fp8_with_scale ||
             (info.name.ends_with(".weight") && quantization::is_fp8_cast_parameter(info.name));
    case quantization::Mode::Fp8Blockwise:
      return fp8_with_scale ||
             (info.name.ends_with(".weight") &&
              quantization::is_fp8_blockwise_linear(
                  info.name.substr(0, info.name.size() - std::string(".weight").size())));
    case quantization::Mode::Nvfp4Cast:
    case quantization::Mode::Nvfp4Prequant: return false;  // nvfp4_loaded_bytes counts those
  }
  return false;
}

int64_t file_bytes(const std::string& path, std::initializer_list<const char*> prefixes,
                   DType dtype, quantization::Mode mode) {
  if (io::is_gguf_file(path)) {
    // GGML blocks are held as stored, dense tensors at `dtype` (GGUF files take no mode).
    int64_t matched = 0, all = 0;
    for (const io::StoredTensorInfo& t : io::stored_tensor_infos(path)) {
      const int64_t bytes = t.ggml_blocks || !dtype_is_floating(t.dtype)
                                ? t.nbytes
                                : t.shape.numel() * static_cast<int64_t>(dtype_size(dtype));
      all += bytes;
      for (const char* p : prefixes)
        if (t.name.rfind(p, 0) == 0) {
          matched += bytes;
          break;
        }
    }
    return prefixes.size() == 0 ? all : matched;
  }
  const auto file = io::SafetensorsFile::open(path);
  int64_t matched = 0, all = 0;
  constexpr std::string_view kModelPrefix = "model.diffusion_model.";
  for (const io::TensorInfo& info : file->infos()) {
    const std::string name = info.name.starts_with(kModelPrefix)
                                 ? info.name.substr(kModelPrefix.size())
                                 : info.name;
    const std::optional<int64_t> nvfp4 = quantization::nvfp4_loaded_bytes(*file, info, name, mode);
    const int64_t bytes =
        nvfp4                               ? *nvfp4
        : !dtype_is_floating(info.dtype)    ? static_cast<int64_t>(info.nbytes())
        : loads_as_e4m3(*file, info, mode) ? info.numel()
                                           : info.numel() * static_cast<int64_t>(dtype_size(dtype));
    all += bytes;
    for (const char* p : prefixes)
      if (info.name.rfind(p, 0) == 0) {
        matched += bytes;
        break;
      }
  }
  return prefixes.size() == 0 ? all : matched;
}

}  // namespace

int64_t activation_headroom(int64_t budget_bytes) {
  return std::max(budget_bytes / 5, std::min(6 * kGiB, budget_bytes / 2));
}

int64_t default_model_budget(int64_t budget_bytes) {
  LTX_CHECK(budget_bytes > 0, "default_model_budget: the memory budget must be > 0 bytes, got ",
            budget_bytes);
  return budget_bytes - activation_headroom(budget_bytes);
}

int64_t parse_gib(const std::string& text, const char* flag) {
  size_t used = 0;
  double gib = 0.0;
  try {
    gib = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LTX_CHECK(used == text.size() && used > 0 && std::isfinite(gib), flag, " '", text,
            "' is not a number of GiB (e.g. 24 or 23.5)");
  LTX_CHECK(gib > 0, flag, " ", text, " must be more than 0 GiB");
  LTX_CHECK(gib < 1e9, flag, " ", text, " GiB is more memory than any device has");
  return static_cast<int64_t>(gib * static_cast<double>(kGiB));
}

int64_t stored_bytes(const std::string& path, std::initializer_list<const char*> prefixes,
                     DType dtype, quantization::Mode quantization) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return file_bytes(path, prefixes, dtype, quantization);
  if (!fs::is_directory(path, ec)) return 0;
  int64_t total = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec))
    if (e.is_regular_file(ec) && e.path().extension() == ".safetensors")
      total += file_bytes(e.path().string(), prefixes, dtype, quantization);
  return total;
}

std::vector<ComponentSize> component_sizes(const ModelPaths& p, DType dtype) {
  std::vector<ComponentSize> out;
  const bool single = p.layout == ModelPaths::Layout::SingleFile;
  auto add = [&](const char* component, const ComponentPath& path,
                 std::initializer_list<const char*> prefixes, DType dt,
                 quantization::Mode mode = quantization::Mode::None) {
    if (!path.given()) return;
    out.push_back({component, stored_bytes(path.path, prefixes, dt, mode)});
  };
  if (single)
    add("transformer", p.transformer, {"model.diffusion_model."}, dtype, p.quantization);
  else
    add("transformer", p.transformer, {}, dtype, p.quantization);
  if (p.text_encoder.given()) {
    // As the text model loads (no vision tower; in bf16 FP8 Linear weights kept at a byte).
    const BlockModelSizes g = text_encoder_sizes(p.text_encoder.path, dtype);
    out.push_back({"text encoder", g.fixed_bytes + g.blocks * g.block_bytes});
  }
  add("video encoder", p.video_vae, {"vae.encoder.", "encoder."}, dtype);
  add("video decoder", p.video_vae, {"vae.decoder.", "decoder."}, dtype);
  add("audio decoder", p.audio_vae, {"audio_vae.decoder.", "vocoder."}, DType::F32);
  add("spatial upsampler", p.spatial_upsampler, {}, dtype);
  add("temporal upsampler", p.temporal_upsampler, {}, dtype);
  return out;
}

std::string gib_text(int64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
  return s;
}

void check_budget_fits(const std::vector<ComponentSize>& components, int64_t budget_bytes,
                       const std::string& budget_flag) {
  if (components.empty()) return;
  const auto largest = std::max_element(
      components.begin(), components.end(),
      [](const ComponentSize& a, const ComponentSize& b) { return a.bytes < b.bytes; });
  LTX_CHECK(largest->bytes + kMinActivationHeadroom <= budget_bytes, "the ", largest->component,
            " needs ", gib_text(largest->bytes), " on the device plus at least ",
            gib_text(kMinActivationHeadroom), " for its work, more than the ", budget_flag,
            " budget of ", gib_text(budget_bytes), "; nothing was loaded; ", kOutOfMemoryHelp);
}

void apply_gpu_budget(Device device, int64_t bytes, const char* flag) {
  LTX_CHECK(!device.is_cpu(), flag, " budgets GPU memory; it does not apply to --device cpu (drop "
            "it, or add --device cuda)");
  LTX_CHECK(bytes > 0, flag, " must be more than 0 GiB");
  backend::check_device(device, flag);
  const int64_t total = backend::total_memory_bytes(device);
  LTX_CHECK(bytes <= total, flag, " ", gib_text(bytes), " is more than ", device.str(), " has (",
            gib_text(total), "); give at most that, or leave the flag out to use all of it");
  backend::set_memory_limit(device, bytes, flag);
}

}  // namespace ltx::generate
