#include "quantization/nvfp4.h"

#include <array>
#include <cctype>
#include <string_view>

#include "core/error.h"
#include "ops/nvfp4.h"

namespace ltx::quantization {

namespace {

constexpr std::string_view kNvfp4BlocksPrefix = "transformer_blocks.";
// The reference's FV allowlist: its FP4 GEMM does not take the audio branch's or the gate's
// shapes, so those stay dense.
constexpr std::array<std::string_view, 12> kCastSuffixes = {
    "attn1.to_q",        "attn1.to_k",         "attn1.to_v",
    "attn1.to_out.0",    "attn2.to_q",         "attn2.to_out.0",
    "audio_to_video_attn.to_q", "audio_to_video_attn.to_out.0",
    "video_to_audio_attn.to_k", "video_to_audio_attn.to_v",
    "ff.net.0.proj",     "ff.net.2"};

std::string layer_name(const io::WeightMap& w, const std::string& name) { return w.prefix() + name; }

}  // namespace

bool is_nvfp4_cast_linear(const std::string& module_name) {
  std::string_view s = module_name;
  if (!s.starts_with(kNvfp4BlocksPrefix)) return false;
  s.remove_prefix(kNvfp4BlocksPrefix.size());
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0 || digits == s.size() || s[digits] != '.') return false;
  s.remove_prefix(digits + 1);
  // torch.compile's remap may insert "_orig_mod." after the block index.
  if (s.starts_with("_orig_mod.")) s.remove_prefix(std::string_view("_orig_mod.").size());
  for (std::string_view suffix : kCastSuffixes)
    if (s == suffix) return true;
  return false;
}

std::optional<Nvfp4Parameters> take_prequant_nvfp4(io::WeightMap& w, const std::string& name,
                                                   int64_t in_features, int64_t out_features,
                                                   Device device) {
  const std::string scale = name + ".weight_scale", scale_2 = name + ".weight_scale_2";
  const bool has_scale = w.contains(scale), has_scale_2 = w.contains(scale_2);
  const std::string layer = layer_name(w, name);
  LTX_CHECK(has_scale == has_scale_2, "--quantization nvfp4-prequant: layer ", layer, " has ",
            has_scale ? ".weight_scale without .weight_scale_2" : ".weight_scale_2 without .weight_scale",
            "; an NVFP4 file pairs them (re-export the checkpoint, or load its bf16 original with "
            "--quantization nvfp4-cast)");
  if (!has_scale) return std::nullopt;
  LTX_CHECK(in_features % ops::kNvfp4BlockSize == 0, "--quantization nvfp4-prequant: layer ",
            layer, " has ", in_features, " input features, not a multiple of ",
            ops::kNvfp4BlockSize, "; NVFP4 cannot hold it (use --quantization none)");
  const auto describe = [&](const std::string& n) {
    return str(dtype_name(w.dtype(n)), " ", w.shape(n).str());
  };
  LTX_CHECK(w.contains(name + ".weight"), "--quantization nvfp4-prequant: layer ", layer,
            " has NVFP4 scales but no .weight; the file is incomplete (re-export it)");
  const Shape scales_shape = ops::nvfp4_block_scales_shape(out_features, in_features);
  // Compared dim by dim: g++ 12 at -O3 reports a comparison with a Shape temporary here as
  // possibly uninitialised (a false positive that depends on what is inlined around it).
  const Shape stored = w.shape(name + ".weight");
  LTX_CHECK(w.dtype(name + ".weight") == DType::U8 && stored.size() == 2 &&
                stored[0] == out_features && stored[1] == in_features / 2,
            "--quantization nvfp4-prequant: ", layer, ".weight is ", describe(name + ".weight"),
            "; an NVFP4 weight of this layer is u8 [", out_features, ", ", in_features / 2,
            "] (two E2M1 values a byte)");
  LTX_CHECK(w.dtype(scale) == DType::F8E4M3FN && w.shape(scale) == scales_shape,
            "--quantization nvfp4-prequant: ", layer, ".weight_scale is ", describe(scale),
            "; this layer's NVFP4 block scales are f8_e4m3fn ", scales_shape.str(),
            " (one per 16 inputs, padded to cuBLAS's 128x4 tiles)");
  LTX_CHECK(w.dtype(scale_2) == DType::F32 && w.shape(scale_2).numel() == 1,
            "--quantization nvfp4-prequant: ", layer, ".weight_scale_2 is ", describe(scale_2),
            "; it must be an f32 scalar (the per-tensor decode scale)");
  Nvfp4Parameters p;
  p.weight.packed = w.take(name + ".weight", {out_features, in_features / 2}, DType::U8, device);
  p.weight.block_scales = w.take(scale, scales_shape, DType::F8E4M3FN, device);
  p.weight.tensor_scale = w.take_any_shape(scale_2, DType::F32, device).reshape({});
  if (w.contains(name + ".input_scale"))
    p.input_scale = w.take_any_shape(name + ".input_scale", DType::F32, device).reshape({});
  return p;
}

ops::Nvfp4Weight take_cast_nvfp4(io::WeightMap& w, const std::string& name, int64_t in_features,
                                 int64_t out_features, Device device) {
  LTX_CHECK(in_features % ops::kNvfp4BlockSize == 0, "--quantization nvfp4-cast: layer ",
            layer_name(w, name), " has ", in_features, " input features, not a multiple of ",
            ops::kNvfp4BlockSize, "; NVFP4 cannot hold it (use --quantization none or fp8-cast)");
  const Tensor weight = w.take(name + ".weight", {out_features, in_features}, DType::BF16, device);
  if (!weight.defined()) return {};  // missing or misshaped: recorded for WeightMap::finish
  return ops::quantize_nvfp4(weight);
}

int64_t nvfp4_weight_bytes(int64_t out_features, int64_t in_features) {
  return out_features * (in_features / 2) +
         ops::nvfp4_block_scales_shape(out_features, in_features).numel() +
         static_cast<int64_t>(sizeof(float));
}

std::optional<int64_t> nvfp4_loaded_bytes(const io::SafetensorsFile& file,
                                          const io::TensorInfo& info, const std::string& name,
                                          Mode mode) {
  if (mode == Mode::Nvfp4Cast) {
    constexpr std::string_view kWeight = ".weight";
    if (!name.ends_with(kWeight) || info.shape.size() != 2 || !dtype_is_floating(info.dtype))
      return std::nullopt;
    if (!is_nvfp4_cast_linear(name.substr(0, name.size() - kWeight.size()))) return std::nullopt;
    return nvfp4_weight_bytes(info.shape[0], info.shape[1]);
  }
  if (mode == Mode::Nvfp4Prequant) {
    // Every tensor of a layer that has both scales loads as stored (take_prequant_nvfp4); the
    // bias, like the dense layers, in the compute dtype.
    for (std::string_view suffix :
         {".weight", ".weight_scale_2", ".weight_scale", ".input_scale"}) {
      if (!info.name.ends_with(suffix)) continue;
      const std::string stem = info.name.substr(0, info.name.size() - suffix.size());
      if (file.contains(stem + ".weight_scale") && file.contains(stem + ".weight_scale_2"))
        return static_cast<int64_t>(info.nbytes());
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace ltx::quantization
