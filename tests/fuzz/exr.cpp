// exr: an EXR frame in memory through media::decode_exr (OpenEXR's InputFile on a memory stream,
// then our channel selection and data-window handling, the path read_exr takes for HDR inputs).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_support.h"
#include "media/exr.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)ltx::media::decode_exr(data, size, "fuzz.exr");
  } catch (const ltx::Error&) {
  }
  return 0;
}
