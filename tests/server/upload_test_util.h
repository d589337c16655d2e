#pragma once
// Bodies for the request tests: multipart form parts (text fields, uploaded images and clips),
// small real PNG / JPEG files, base64 data URLs, and a PNG that is only a header declaring any
// size.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "media/image.h"
#include "server/video_service.h"

namespace ltx::server::test {

// A text field of a multipart form.
inline FormPart text(std::string name, std::string value) { return {std::move(name), std::move(value), "", ""}; }
// A file part: an uploaded image (PNG by default) or a video / audio clip (MP4 by default).
inline FormPart image_part(std::string name, std::string bytes, std::string filename = "image.png",
                           std::string type = "image/png") {
  return {std::move(name), std::move(bytes), std::move(filename), std::move(type)};
}
inline FormPart clip_part(std::string name, std::string bytes, std::string filename = "clip.mp4",
                          std::string type = "video/mp4") {
  return {std::move(name), std::move(bytes), std::move(filename), std::move(type)};
}
// A multipart body of these parts, in order.
inline CreateBody form(std::vector<FormPart> parts) {
  CreateBody b;
  b.multipart = true;
  b.parts = std::move(parts);
  return b;
}

inline std::string png(int64_t w = 16, int64_t h = 8) {
  const auto b = media::encode_png(Tensor::full({h, w, 3}, 120.0, DType::U8));
  return std::string(b.begin(), b.end());
}
inline std::string jpeg(int64_t w = 16, int64_t h = 8) {
  const auto b = media::encode_jpeg(Tensor::full({h, w, 3}, 120.0, DType::U8));
  return std::string(b.begin(), b.end());
}
inline std::string base64(const std::string& in) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += a[(v >> k) & 63];
  }
  if (i < in.size()) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += a[(v >> 18) & 63];
    out += a[(v >> 12) & 63];
    out += i + 1 < in.size() ? a[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}
inline std::string data_url(const std::string& bytes, const std::string& type = "image/png") {
  return "data:" + type + ";base64," + base64(bytes);
}
// A PNG that is only a signature and an IHDR declaring w x h: no pixel data at all.
inline std::string png_header(uint32_t w, uint32_t h) {
  std::string b = "\x89PNG\r\n\x1a\n";
  b += std::string("\0\0\0\x0d", 4) + "IHDR";
  for (uint32_t v : {w, h})
    for (int s = 24; s >= 0; s -= 8) b += static_cast<char>((v >> s) & 0xFF);
  b += std::string("\x08\x02\0\0\0", 5) + std::string(4, '\0');  // 8-bit RGB, CRC not checked
  return b;
}

}  // namespace ltx::server::test
