// exr_frames: an HDR request's frame folder as the server receives it, a tar of EXR frames
// (server::check_upload_exr_frames: the byte limit, libarchive's reader through unpack_exr_tar
// with its entry rules, then each frame checked as an uploaded EXR still and unpacked into a
// scratch folder). Archives are the wrapper around user bytes that libarchive parses and our code
// walks: names, types, sizes, duplicates, the frame and byte limits. The scratch folders go to
// /dev/shm: nothing touches the disk.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_support.h"
#include "server/api_error.h"
#include "server/tar_archive.h"
#include "server/upload_exr_frames.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  ltx::fuzz::scratch_in_memory();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ltx;
  const std::string bytes(fuzz::as_text(data, size));
  (void)server::is_tar(bytes);
  server::MediaLimits limits;
  limits.max_pixels = 1 << 16;
  limits.max_bytes = 1 << 20;
  try {
    const server::CheckedMedia frames =
        server::check_upload_exr_frames(bytes, "video_conditioning", limits, 8);
    if (frames.header.frames < 1 || frames.header.frames > 8) __builtin_trap();
  } catch (const server::ApiError&) {
  } catch (const Error&) {
  }
  return 0;
}
