#include "media/exif.h"

#include <cstring>

namespace ltx::media {

int exif_orientation(const uint8_t* data, size_t size) {
  if (data == nullptr) return 0;
  if (size >= 6 && std::memcmp(data, "Exif\0\0", 6) == 0) {
    data += 6;
    size -= 6;
  }
  if (size < 8) return 0;
  bool le;
  if (data[0] == 'I' && data[1] == 'I') {
    le = true;
  } else if (data[0] == 'M' && data[1] == 'M') {
    le = false;
  } else {
    return 0;
  }
  auto u16 = [&](size_t at) -> uint32_t {
    return le ? data[at] | (data[at + 1] << 8) : (data[at] << 8) | data[at + 1];
  };
  auto u32 = [&](size_t at) -> uint32_t {
    return le ? u16(at) | (u16(at + 2) << 16) : (u16(at) << 16) | u16(at + 2);
  };
  if (u16(2) != 42) return 0;
  const size_t ifd = u32(4);
  if (ifd > size - 2 || ifd < 8) return 0;
  const size_t count = u16(ifd);
  for (size_t i = 0; i < count; ++i) {
    const size_t e = ifd + 2 + 12 * i;
    if (e + 12 > size) return 0;
    if (u16(e) != 0x0112) continue;
    const uint32_t type = u16(e + 2), n = u32(e + 4);
    if (n < 1) return 0;
    if (type == 3) return static_cast<int>(u16(e + 8));  // SHORT, inline
    if (type == 4) return static_cast<int>(u32(e + 8));  // LONG, inline
    if (type == 1) return data[e + 8];                   // BYTE, inline
    return 0;
  }
  return 0;
}

int xmp_orientation(std::string_view xmp) {
  constexpr std::string_view kKey = "tiff:Orientation";
  for (size_t pos = xmp.find(kKey); pos != std::string_view::npos; pos = xmp.find(kKey, pos + 1)) {
    size_t p = pos + kKey.size();
    if (xmp.substr(p, 2) == "=\"") {
      p += 2;
    } else if (xmp.substr(p, 1) == ">") {
      p += 1;
    } else {
      continue;
    }
    if (p < xmp.size() && xmp[p] >= '0' && xmp[p] <= '9') return xmp[p] - '0';
  }
  return 0;
}

Tensor apply_orientation(const Tensor& image, int orientation) {
  LTX_CHECK(image.dim() == 3, "apply_orientation: expected an image [H, W, C]; got ",
            image.describe());
  if (orientation != 3 && orientation != 6 && orientation != 8) return image;
  const Tensor src = image.to(Device::cpu()).contiguous();
  const int64_t H = src.size(0), W = src.size(1), C = src.size(2);
  const size_t px = static_cast<size_t>(C) * src.element_size();
  const bool swap = orientation != 3;
  Tensor dst = Tensor::empty(swap ? Shape{W, H, C} : Shape{H, W, C}, src.dtype());
  const auto* s = static_cast<const uint8_t*>(src.raw_data());
  auto* d = static_cast<uint8_t*>(dst.raw_data());
  const int64_t OH = dst.size(0), OW = dst.size(1);
  for (int64_t i = 0; i < OH; ++i) {
    for (int64_t j = 0; j < OW; ++j) {
      int64_t r, c;
      if (orientation == 3) {  // 180°
        r = H - 1 - i;
        c = W - 1 - j;
      } else if (orientation == 8) {  // PIL rotate(90): 90° counter-clockwise
        r = j;
        c = W - 1 - i;
      } else {  // 6, PIL rotate(270): 90° clockwise
        r = H - 1 - j;
        c = i;
      }
      std::memcpy(d + (i * OW + j) * px, s + (r * W + c) * px, px);
    }
  }
  return dst;
}

}  // namespace ltx::media
