#pragma once
// Still images: reading conditioning images (PNG, JPEG) the way the reference's PIL path does
// (ltx_pipelines/utils/media_io/decode.py: decode_image), and writing PNG / JPEG files and folders
// of PNG frames. Needs libpng, libjpeg-turbo and lcms2 (CMake option LTX_IMAGE_IO); without them
// these functions throw ltx::Error saying how to rebuild.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/input_limits.h"
#include "core/tensor.h"
#include "media/temp_output.h"

namespace ltx::media {

// An image file as u8 RGB [H, W, 3]. The format comes from the content (PNG or JPEG signature),
// not the name. As the reference:
//  - EXIF orientation (JPEG APP1, PNG eXIf or "Raw profile type exif", else XMP tiff:Orientation)
//    3 / 6 / 8 rotates by 180° / 90° clockwise / 90° counter-clockwise (media/exif.h);
//  - alpha is dropped (RGBA -> RGB, LA -> L), never composited; palette images take their colours;
//  - an embedded ICC profile is converted to sRGB (lcms2, perceptual intent; a profile that does
//    not fit the pixels is skipped with a warning, as PIL's fallback);
//  - grayscale is replicated to RGB.
// 16-bit PNGs keep the high byte (PIL does so for RGB; its clipping of 16-bit grayscale is not
// copied). CMYK JPEGs are rejected. Throws ltx::Error naming the file for unreadable, truncated
// or unsupported files.
Tensor read_image(const std::string& path);
// The most pixels (width x height, as the file declares them) read_image / decode_image decode:
// the engine's image limit (core/input_limits.h). A file declaring more is refused before its
// pixels are allocated.
inline constexpr int64_t kMaxImagePixels = limits::kMaxImagePixels;
// The same from bytes in memory; `name` is used in error messages.
Tensor decode_image(const uint8_t* data, size_t size, const std::string& name);

// An image's format and stored size from its header alone (the PNG IHDR, the JPEG SOFn), without
// decoding a pixel: a server checks the pixel count of an upload before decode_image allocates
// it. The size is before EXIF orientation (a rotation swaps width and height, not their
// product). Needs no image library. Throws ltx::Error naming `name` for data that is not PNG or
// JPEG, is truncated before the size, or declares a zero size.
struct ImageInfo {
  std::string format;  // "png" or "jpeg"
  int64_t width = 0, height = 0;
};
ImageInfo probe_image(const uint8_t* data, size_t size, const std::string& name);

// PNG bytes / file of a u8 image [H, W, C], C in {1 (gray), 3 (RGB), 4 (RGBA)}, any strides.
std::vector<uint8_t> encode_png(const Tensor& image);
void write_png(const std::string& path, const Tensor& image);  // atomic (temp name + rename)
// Baseline JPEG (4:2:0, libjpeg-turbo defaults) of a u8 RGB [H, W, 3] or gray [H, W, 1] image.
std::vector<uint8_t> encode_jpeg(const Tensor& image, int quality = 95);
void write_jpeg(const std::string& path, const Tensor& image, int quality = 95);

// A folder of frame_00000.png, frame_00001.png, ... filled chunk by chunk. It is built as
// "<dir>.tmp" and renamed on finish(); `dir` must not exist or be an empty folder.
class PngFrameWriter {
 public:
  explicit PngFrameWriter(std::string dir);
  ~PngFrameWriter();
  PngFrameWriter(const PngFrameWriter&) = delete;
  PngFrameWriter& operator=(const PngFrameWriter&) = delete;

  // frames: [F, H, W, 3] or [H, W, 3]; floating values in [0, 1] (converted as the reference's
  // rgb24 converter: clamp, * 255, truncate; see rgb_to_uint8) or u8.
  void write_frames(const Tensor& frames);
  void finish();
  int64_t frames_written() const { return frames_; }

 private:
  std::string dir_;
  std::unique_ptr<TempOutput> tmp_;
  int64_t frames_ = 0;
  bool closed_ = false;
};

void write_png_frames(const std::string& dir, const Tensor& frames);

}  // namespace ltx::media
