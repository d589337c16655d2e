#pragma once
// Writes a safetensors checkpoint's transformer as a community-style GGUF file (what ComfyUI-GGUF's
// converter makes of an LTX checkpoint): the `model.diffusion_model.` tensors under bare names,
// the 2-D weights of more than 1024 values whose rows are whole 32-value blocks as Q8_0 (ggml's
// quantize_row_q8_0 rule), everything else F32, general.architecture "ltxv" and the checkpoint's
// `config` / `model_version` metadata as strings. Tests only (ltx has no GGUF writer).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype_bits.h"
#include "core/ggml_type.h"
#include "io/gguf_builder.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"

namespace ltx::test {

// ggml's Q8_0 blocks of `v` (a whole number of 32-value blocks): d = amax / 127 stored as f16,
// q = round(x / d).
inline std::string quantize_q8_0(const std::vector<float>& v) {
  std::string out;
  for (size_t b = 0; b < v.size(); b += 32) {
    float amax = 0;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(v[b + i]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t h = dtype_bits::f32_to_f16(d);
    out.append(reinterpret_cast<const char*>(&h), 2);
    for (size_t i = 0; i < 32; ++i)
      out.push_back(static_cast<char>(static_cast<int8_t>(std::lround(v[b + i] * id))));
  }
  return out;
}

// `keep_connectors`: also the text connectors under the transformer's prefix (some files have
// them); otherwise the transformer only.
inline void write_transformer_gguf(const std::string& checkpoint, const std::string& out,
                                   bool keep_connectors = false) {
  const io::SafetensorsFile file(checkpoint);
  GgufBuilder b;
  b.kv_string("general.architecture", "ltxv");
  for (const char* key : {"config", "model_version"})
    if (file.metadata().count(key)) b.kv_string(key, file.metadata().at(key));
  const std::string prefix = "model.diffusion_model.";
  for (const std::string& name : file.names()) {
    if (!name.starts_with(prefix)) continue;
    if (!keep_connectors && name.find("embeddings_connector.") != std::string::npos) continue;
    const Tensor t = file.tensor(name).to(DType::F32).contiguous();
    std::vector<uint64_t> ne;
    for (int d = t.dim() - 1; d >= 0; --d) ne.push_back(static_cast<uint64_t>(t.size(d)));
    const std::vector<float> v = t.to_float_vector();
    if (t.dim() == 2 && t.size(1) % 32 == 0 && t.numel() > 1024) {
      b.tensor(name.substr(prefix.size()), ne, static_cast<int32_t>(GgmlType::Q8_0), quantize_q8_0(v));
    } else {
      std::string bytes(v.size() * 4, '\0');
      std::memcpy(bytes.data(), v.data(), bytes.size());
      b.tensor(name.substr(prefix.size()), ne, static_cast<int32_t>(GgmlType::F32), bytes);
    }
  }
  write_bytes(out, b.bytes());
}

}  // namespace ltx::test
