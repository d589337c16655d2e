// image: PNG and JPEG bytes through the media wrappers (media::decode_image: libpng / libjpeg-turbo
// with our limits, EXIF / XMP orientation, ICC to sRGB through lcms2, gray and palette expansion;
// media::probe_image), and through the server's upload checks of an image part
// (server::check_upload_image: the header probe and pixel limit before the decode) and of a
// base64 `data:` URL (server::image_from_data_url).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "fuzz_support.h"
#include "media/exif.h"
#include "media/image.h"
#include "server/api_error.h"
#include "server/upload_image.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ltx::fuzz::quiet();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ltx;
  try {
    (void)media::decode_image(data, size, "fuzz-image");
  } catch (const Error&) {
  }
  try {
    (void)media::probe_image(data, size, "fuzz-image");
  } catch (const Error&) {
  }
  (void)media::exif_orientation(data, size);
  (void)media::xmp_orientation(fuzz::as_text(data, size));
  const std::string bytes(fuzz::as_text(data, size));
  try {
    (void)server::check_upload_image(bytes, "input_reference", 1 << 20, 1 << 20);
  } catch (const server::ApiError&) {
  }
  try {
    (void)server::image_from_data_url(bytes, "input_reference", 1 << 20);
  } catch (const server::ApiError&) {
  }
  return 0;
}
