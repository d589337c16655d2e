// lora: a LoRA file in memory opened strict and non-strict (lora::LoraFile::from_file: the
// factor-pair names after the ComfyUI renaming, half pairs, ranks, dtypes, alpha values read as
// numbers), and its pairs grouped into a set as a stage uses them (lora::products_for). The
// fusion arithmetic is not here: it runs on the ops, which this build does not compile.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "fuzz_support.h"
#include "io/safetensors.h"
#include "models/lora/lora.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ltx;
  std::shared_ptr<const io::SafetensorsFile> file;
  try {
    file = io::SafetensorsFile::from_bytes("fuzz-lora.safetensors",
                                           std::vector<uint8_t>(data, data + size));
  } catch (const Error&) {
    return 0;
  }
  for (const bool strict : {true, false}) {
    try {
      const auto lf = lora::LoraFile::from_file(file, lora::OpenOptions{strict});
      const lora::LoraSet set = {{lf, 0.5}, {lf, 0.0}};
      (void)lora::is_identity(set);
      (void)lora::describe(set);
      // The factors are views of the file: their first and last elements lie inside it.
      for (const auto& [target, pair] : lf->targets()) {
        for (const Tensor* t : {&pair.a, &pair.b})
          if (t->numel() > 0) (void)t->flatten().slice(0, t->numel() - 1, t->numel()).item();
      }
    } catch (const Error&) {
    }
  }
  return 0;
}
