#include "server/upload_image.h"

#include <array>
#include <cctype>
#include <cstring>

#include "core/error.h"
#include "media/exr.h"
#include "media/image.h"
#include "media/support.h"
#include "server/api_error.h"

namespace ltx::server {

namespace {

[[noreturn]] void invalid(const std::string& param, const std::string& code,
                          const std::string& message) {
  throw ApiError(422, code, message, param);
}

std::string base64_decode(const std::string& in, const std::string& param) {
  static const auto table = [] {
    std::array<int, 256> t{};
    t.fill(-1);
    const std::string a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < a.size(); ++i) t[static_cast<unsigned char>(a[i])] = static_cast<int>(i);
    t['-'] = 62;  // the URL-safe alphabet too
    t['_'] = 63;
    return t;
  }();
  const auto bad = [&] {
    invalid(param, "invalid_image", str(param, ": the data URL's base64 is not valid"));
  };
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (const char ch : in) {
    if (ch == '=') {
      ++pad;
      continue;
    }
    if (ch == '\n' || ch == '\r' || ch == ' ') continue;
    const int d = table[static_cast<unsigned char>(ch)];
    if (d < 0 || pad > 0) bad();  // a foreign character, or data after the padding
    acc = (acc << 6) | static_cast<uint32_t>(d);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  if (pad > 2 || bits >= 6) bad();  // a lone trailing character holds no whole byte
  return out;
}

bool starts_with_nocase(const std::string& s, const std::string& prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

uint32_t be16(const std::string& b, size_t at) {
  return (static_cast<uint32_t>(static_cast<unsigned char>(b[at])) << 8) |
         static_cast<unsigned char>(b[at + 1]);
}
uint32_t be32(const std::string& b, size_t at) { return (be16(b, at) << 16) | be16(b, at + 2); }

}  // namespace

std::optional<ImageHeader> probe_image_header(const std::string& b) {
  static const std::string kPng = "\x89PNG\r\n\x1a\n";
  if (b.size() >= 8 && b.compare(0, 8, kPng) == 0) {
    if (b.size() < 24 || b.compare(12, 4, "IHDR") != 0) return std::nullopt;
    ImageHeader h{"png", be32(b, 16), be32(b, 20)};
    if (h.width == 0 || h.height == 0) return std::nullopt;
    return h;
  }
  if (b.size() < 4 || static_cast<unsigned char>(b[0]) != 0xFF ||
      static_cast<unsigned char>(b[1]) != 0xD8)
    return std::nullopt;
  // JPEG: walk the marker segments to the first frame header
  size_t i = 2;
  while (i + 4 <= b.size()) {
    if (static_cast<unsigned char>(b[i]) != 0xFF) return std::nullopt;
    const auto marker = static_cast<unsigned char>(b[i + 1]);
    if (marker == 0xFF) {  // a fill byte before the marker
      ++i;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8)) {  // markers without a length
      i += 2;
      continue;
    }
    if (marker == 0xD9 || marker == 0xDA) return std::nullopt;  // the end or scan data first
    const size_t len = be16(b, i + 2);
    if (len < 2) return std::nullopt;
    // SOF0..SOF15 but DHT (C4), JPG (C8) and DAC (CC), which share the range
    const bool sof =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (sof) {
      if (i + 9 > b.size()) return std::nullopt;
      ImageHeader h{"jpeg", be16(b, i + 7), be16(b, i + 5)};
      if (h.width == 0 || h.height == 0) return std::nullopt;
      return h;
    }
    i += 2 + len;
  }
  return std::nullopt;
}

std::string image_from_data_url(const std::string& s, const std::string& param, int64_t max_bytes) {
  for (const char* scheme : {"http://", "https://", "ftp://", "file:"})
    if (starts_with_nocase(s, scheme))
      invalid(param, "unsupported_url",
              str(param,
                  ": the server does not fetch URLs; send the image itself, as a file part or a "
                  "data: URL (data:image/png;base64,...)"));
  if (!starts_with_nocase(s, "data:"))
    invalid(
        param, "invalid_image",
        str(param, " must be an image: a file part or a data: URL (data:image/png;base64,...)"));
  const size_t comma = s.find(',');
  if (comma == std::string::npos || s.substr(0, comma).find(";base64") == std::string::npos)
    invalid(param, "invalid_image",
            str(param, ": only base64 data URLs are read (data:image/png;base64,...)"));
  // base64 text is 4/3 of its bytes: measured before anything is decoded
  const auto bytes = static_cast<int64_t>((s.size() - comma - 1) / 4 * 3);
  if (bytes > max_bytes + 3)
    throw ApiError(413, "image_too_large",
                   str(param, " is about ", bytes, " bytes; this server's limit is ", max_bytes,
                       " (--max-image-bytes)"),
                   param);
  return base64_decode(s.substr(comma + 1), param);
}

bool is_exr_bytes(const std::string& bytes) {
  static constexpr unsigned char kMagic[4] = {0x76, 0x2f, 0x31, 0x01};
  return bytes.size() >= 4 && std::memcmp(bytes.data(), kMagic, 4) == 0;
}

ImageHeader check_upload_exr(const std::string& bytes, const std::string& param,
                             int64_t max_pixels) {
  if (!media::openexr_available())
    invalid(param, "images_unsupported",
            str(param, " is an OpenEXR image, and this server was built without OpenEXR (CMake "
                       "LTX_OPENEXR); send a PNG or JPEG"));
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  ImageHeader header{"exr", 0, 0};
  try {
    const media::ExrImageSize size = media::exr_image_size(data, bytes.size(), param);
    header.width = size.width;
    header.height = size.height;
  } catch (const Error& e) {
    invalid(param, "invalid_image", str(param, " cannot be decoded: ", e.what()));
  }
  if (header.width > max_pixels / header.height)
    invalid(param, "image_too_many_pixels",
            str(param, " is ", header.width, "x", header.height,
                " pixels; this server's limit is ", max_pixels, " pixels (--max-image-pixels)"));
  try {
    media::decode_exr(data, bytes.size(), param);
  } catch (const Error& e) {
    invalid(param, "invalid_image", str(param, " cannot be decoded: ", e.what()));
  }
  return header;
}

ImageHeader check_upload_image(const std::string& bytes, const std::string& param,
                               int64_t max_bytes, int64_t max_pixels) {
  if (static_cast<int64_t>(bytes.size()) > max_bytes)
    throw ApiError(413, "image_too_large",
                   str(param, " has ", bytes.size(), " bytes; this server's limit is ", max_bytes,
                       " (--max-image-bytes)"),
                   param);
  if (is_exr_bytes(bytes)) return check_upload_exr(bytes, param, max_pixels);
  const auto header = probe_image_header(bytes);
  if (!header)
    invalid(param, "invalid_image", str(param, " is not a PNG, JPEG or OpenEXR image"));
  // w > max / h is w * h > max without the product (a header may declare 2^32 x 2^32)
  if (header->width > max_pixels / header->height)
    invalid(param, "image_too_many_pixels",
            str(param, " is ", header->width, "x", header->height,
                " pixels; this server's limit is ", max_pixels, " pixels (--max-image-pixels)"));
  if (!media::image_io_available())
    invalid(param, "images_unsupported",
            "this server was built without image support (CMake LTX_IMAGE_IO); send no images");
  try {
    media::decode_image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), param);
  } catch (const Error& e) {
    invalid(param, "invalid_image", str(param, " cannot be decoded: ", e.what()));
  }
  return *header;
}

}  // namespace ltx::server
