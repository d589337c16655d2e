#pragma once
// An image a request uploads (a file part or a base64 `data:` URL) checked before the server
// keeps it: its byte count, then its format and pixel count from the header alone (the PNG IHDR,
// the JPEG SOFn), so a small file declaring a huge image is refused before anything allocates its
// pixels, then a full decode. Remote URLs are never fetched. Errors are ApiError naming `param`:
// 413 `image_too_large` over the byte limit, 422 `unsupported_url`, `invalid_image` (not a PNG,
// JPEG or OpenEXR image, bad base64, undecodable), `image_too_many_pixels`, `images_unsupported`
// (a build without image I/O, or without OpenEXR for an EXR).
#include <cstdint>
#include <optional>
#include <string>

namespace ltx::server {

struct ImageHeader {
  std::string format;  // "png", "jpeg" or "exr"
  int64_t width = 0, height = 0;
};

// The format and stored size (before EXIF orientation) from the header; nullopt when the bytes
// are not a PNG or JPEG, end before the size, or declare a zero size.
std::optional<ImageHeader> probe_image_header(const std::string& bytes);

// The bytes of a `data:[<type>];base64,<data>` URL. Its length is checked against `max_bytes`
// before decoding.
std::string image_from_data_url(const std::string& url, const std::string& param,
                                int64_t max_bytes);

// Whether the bytes start with OpenEXR's magic number.
bool is_exr_bytes(const std::string& bytes);

// An OpenEXR image's part of check_upload_image (after the byte limit): its data window from the
// header, the pixel limit, then a full decode (its channels); the same errors.
ImageHeader check_upload_exr(const std::string& bytes, const std::string& param,
                             int64_t max_pixels);

// Checks an upload in the order above; returns its header. An OpenEXR still (an HDR request's
// conditioning image) is checked the same way: its data window from the header, the pixel limit,
// then a full decode through OpenEXR (`images_unsupported` in a build without it).
ImageHeader check_upload_image(const std::string& bytes, const std::string& param,
                               int64_t max_bytes, int64_t max_pixels);

}  // namespace ltx::server
