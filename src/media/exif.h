#pragma once
// Image orientation as the reference reads it (PIL's Image.getexif(), decode.py: decode_image):
// the EXIF Orientation tag (0x0112) of IFD0, else an XMP "tiff:Orientation" value. Only the
// rotations 3 (180°), 6 (270° counter-clockwise) and 8 (90° counter-clockwise) are applied, as in
// the reference; the mirrored orientations 2, 4, 5, 7 are left alone.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/tensor.h"

namespace ltx::media {

// Orientation in an EXIF block: a TIFF structure ("II*\0" / "MM\0*"), optionally preceded by
// "Exif\0\0". 0 when absent or malformed.
int exif_orientation(const uint8_t* data, size_t size);
// The first digit after "tiff:Orientation=\"" or "tiff:Orientation>" in an XMP packet; 0 if none.
int xmp_orientation(std::string_view xmp);
// Rotates an image [H, W, C] for orientations 3, 6, 8 (a contiguous copy); others: unchanged.
Tensor apply_orientation(const Tensor& image, int orientation);

}  // namespace ltx::media
