#pragma once
// The image half of image-aware prompt enhancement, as the reference prepares the picture:
//
//   1. generate_enhanced_prompt: resize_aspect_ratio_preserving(image, 896) on the decoded u8
//      image -- torch's bilinear interpolate (align_corners false, no antialias) on a uint8
//      tensor, then the center crop of resize_and_center_crop. torch runs uint8 bilinear as a
//      separable fixed-point resampler (int16 weights with the precision it derives from the
//      largest weight, rows after columns, each pass rounded to u8; its CPU kernels for 3-channel
//      images); resize_u8_torch_bilinear reproduces that, not a float resize;
//   2. Gemma3ImageProcessor (the PIL backend the reference's processor builder picks): PIL
//      Image.resize to size.height x size.width with the config's resample filter (2 = bilinear,
//      PIL's antialiasing convolution with 22-bit fixed-point coefficients, columns then rows,
//      each pass rounded to u8; resize_u8_pil), then u8 * rescale_factor (double, stored as
//      float32), then (x - mean) / std per channel in float32, channels first. No pan-and-scan
//      (the reference's processor call does not enable it; a config that does is refused).
//
// Only PIL's bilinear filter is implemented (Gemma 3's preprocessor_config.json uses it); any
// other `resample` is an error naming the value.
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/tensor.h"

namespace ltx::text {

struct GemmaImageProcessorConfig {
  int64_t height = 896, width = 896;
  int resample = 2;  // PIL's BILINEAR
  bool do_resize = true, do_rescale = true, do_normalize = true;
  double rescale_factor = 1.0 / 255.0;
  std::array<double, 3> image_mean{0.5, 0.5, 0.5};
  std::array<double, 3> image_std{0.5, 0.5, 0.5};

  // preprocessor_config.json (or the nested "image_processor" of processor_config.json) of a
  // Gemma3ImageProcessor; `source` names the file in errors.
  static GemmaImageProcessorConfig from_json(const nlohmann::json& j, const std::string& source);
};

// u8 [H, W, C] -> u8 [out_h, out_w, C]: torch.nn.functional.interpolate(mode="bilinear",
// align_corners=False) on a uint8 tensor (see the header comment).
Tensor resize_u8_torch_bilinear(const Tensor& image, int64_t out_h, int64_t out_w);
// u8 [H, W, C] -> u8 [out_h, out_w, C]: PIL Image.resize(..., resample=BILINEAR).
Tensor resize_u8_pil_bilinear(const Tensor& image, int64_t out_h, int64_t out_w);

// resize_aspect_ratio_preserving(image, long_side): u8 [H, W, 3] -> u8 [h, w, 3] with the long
// side `long_side` (h = int(H * s), w = int(W * s), s = long_side / max(H, W)).
Tensor resize_aspect_ratio_preserving_u8(const Tensor& image, int64_t long_side);

// Gemma3ImageProcessor on one u8 [H, W, 3] image -> pixel_values f32 [1, 3, height, width].
Tensor gemma3_pixel_values(const Tensor& image, const GemmaImageProcessorConfig& config);

// The long side the reference's generate_enhanced_prompt scales the image to first.
inline constexpr int64_t kEnhanceImageLongSide = 896;

}  // namespace ltx::text
