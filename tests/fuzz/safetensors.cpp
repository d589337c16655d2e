// safetensors: the header + tensor table of a file in memory (io::SafetensorsFile::from_bytes,
// the validation every checkpoint, LoRA and text encoder goes through), then what `ltx inspect`
// reads from a valid one (io::inspect_checkpoint: components, metadata, version detection).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<const ltx::io::SafetensorsFile> file;
  try {
    file = ltx::io::SafetensorsFile::from_bytes("fuzz.safetensors",
                                                std::vector<uint8_t>(data, data + size));
  } catch (const ltx::Error&) {
    return 0;
  }
  // Every tensor's bytes lie inside the input: reading the first and last byte of each view
  // lets AddressSanitizer check the ranges the validation accepted.
  volatile uint8_t sink = 0;
  for (const ltx::io::TensorInfo& info : file->infos()) {
    const ltx::Tensor t = file->tensor(info.name);
    if (info.nbytes() > 0) {
      const uint8_t* p = file->tensor_bytes(info.name);
      sink = sink + p[0] + p[info.nbytes() - 1];
    }
    (void)t;
  }
  (void)file->metadata_json();
  try {
    const ltx::io::CheckpointSummary summary = ltx::io::inspect_checkpoint(*file);
    (void)ltx::io::to_json(summary).dump();
    (void)ltx::io::to_text(summary);
  } catch (const ltx::Error&) {
  }
  return 0;
}
