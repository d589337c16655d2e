#include "quantization/gguf_policy.h"

#include <algorithm>
#include <cctype>

namespace ltx::quantization {

namespace {

const GgufQuantType kTypes[] = {
    {"Q8_0", GgmlType::Q8_0, false, 7},  {"Q6_K", GgmlType::Q6_K, false, 18},
    {"Q5_K", GgmlType::Q5_K, false, 16}, {"Q5_K_M", GgmlType::Q5_K, true, 17},
    {"Q4_K", GgmlType::Q4_K, false, 14}, {"Q4_K_M", GgmlType::Q4_K, true, 15},
    {"Q5_0", GgmlType::Q5_0, false, 8},  {"Q4_0", GgmlType::Q4_0, false, 2},
    {"BF16", GgmlType::BF16, false, 32}, {"F16", GgmlType::F16, false, 1},
};

// Aliases llama-quantize users type for the pure K types.
std::string canonical(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  if (s == "Q5_K_S") return "Q5_K";
  if (s == "Q4_K_S") return "Q4_K";
  return s;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

std::optional<GgufQuantType> parse_gguf_quant_type(const std::string& name) {
  const std::string c = canonical(name);
  for (const GgufQuantType& t : kTypes)
    if (t.name == c) return t;
  return std::nullopt;
}

std::string gguf_quant_type_names() {
  std::string s;
  for (const GgufQuantType& t : kTypes) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

GgmlType community_gguf_type(const std::string& name, const Shape& shape, GgmlType source,
                             const GgufQuantType& target) {
  if (shape.size() <= 1 || shape.numel() <= 1024 || contains(name, "scale_shift_table"))
    return GgmlType::F32;
  if (!ggml_is_quantized(target.base)) return target.base;
  for (const char* kept : {"adaln_single.", "caption_projection.", "patchify_proj.", "proj_out."})
    if (contains(name, kept)) return source;
  if (shape.size() != 2 || !name.ends_with("weight")) return source;
  GgmlType type = target.base;
  if (target.k_m_mix && (name.ends_with(".to_v.weight") || name.ends_with("ff.net.2.weight")))
    type = GgmlType::Q6_K;
  if (shape[1] % ggml_traits(type).block_elems != 0) return source;
  return type;
}

}  // namespace ltx::quantization
