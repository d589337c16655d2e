#include "quantization/fp8_blockwise.h"

#include <array>
#include <string_view>

namespace ltx::quantization {

namespace {

// The reference's EXCLUDED_LAYER_SUBSTRINGS (plus "scale_shift_table", a parameter, not a
// Linear). Matched as substrings, as there.
constexpr std::array<std::string_view, 13> kExcluded = {
    "patchify_proj",
    "adaln_single",
    "av_ca_video_scale_shift_adaln_single",
    "av_ca_a2v_gate_adaln_single",
    "caption_projection",
    "proj_out",
    "audio_patchify_proj",
    "audio_adaln_single",
    "av_ca_audio_scale_shift_adaln_single",
    "av_ca_v2a_gate_adaln_single",
    "audio_caption_projection",
    "audio_proj_out",
    "to_gate_logits",
};

}  // namespace

bool is_fp8_blockwise_linear(const std::string& module_name) {
  if (module_name.find("transformer_block") == std::string::npos) return false;
  for (std::string_view s : kExcluded)
    if (module_name.find(s) != std::string::npos) return false;
  return true;
}

bool file_has_fp8_blockwise(const io::WeightMap& w, const std::string& name) {
  const std::string weight = name + ".weight", scale = name + ".weight_scale";
  return w.contains(weight) && w.dtype(weight) == DType::F8E4M3FN && w.contains(scale) &&
         w.shape(scale).size() == 2;
}

}  // namespace ltx::quantization
