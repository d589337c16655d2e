// gguf: a GGUF file in memory (io::GgufFile::from_bytes, the validation every GGUF transformer
// goes through), then what `ltx inspect` and the loaders read from a valid one: the metadata as
// JSON, each tensor's bytes and, for the types ltx computes on, its first row dequantised.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "quantization/ggml_dequant.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<const ltx::io::GgufFile> file;
  try {
    file = ltx::io::GgufFile::from_bytes("fuzz.gguf", std::vector<uint8_t>(data, data + size));
  } catch (const ltx::Error&) {
    return 0;
  }
  // Every tensor's bytes lie inside the input: touching the first and last byte of each lets
  // AddressSanitizer check the ranges the validation accepted.
  volatile uint8_t sink = 0;
  for (const std::string& name : file->names()) {
    try {
      const ltx::io::GgmlTensor t = file->ggml_tensor(name);
      const auto n = static_cast<int64_t>(t.bytes.numel());
      if (n > 0) {
        const auto* p = static_cast<const uint8_t*>(t.bytes.raw_data());
        sink = sink + p[0] + p[n - 1];
      }
      if (ltx::quantization::ggml_can_dequantize(t.type) && t.row_elems > 0 &&
          t.row_elems <= 4096) {
        std::vector<float> row(static_cast<size_t>(t.row_elems));
        ltx::quantization::dequantize_rows(t.type, static_cast<const uint8_t*>(t.bytes.raw_data()),
                                           1, t.row_elems, row.data());
      }
    } catch (const ltx::Error&) {
    }
  }
  try {
    (void)file->metadata_json().dump();
    (void)file->decoded_string_metadata();
    (void)ltx::io::to_json(ltx::io::inspect_checkpoint(*file)).dump();
  } catch (const ltx::Error&) {
  }
  return 0;
}
