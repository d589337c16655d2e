#pragma once
// Conditioning-image preparation, as the reference (ltx_pipelines/utils/media_io/decode.py:
// load_image_and_preprocess, preprocess, encode_single_frame, decode_single_frame; resize.py:
// resize_and_center_crop; range_map.py: normalize_images).
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "media/hdr.h"

namespace ltx::media {

// The CRF re-compression that makes a still look like a video frame the model was trained on:
// crop to even height and width (top-left), convert rgb24 -> yuv420p with libswscale (bilinear
// flags, its default BT.601 limited-range matrix, as PyAV's reformat), encode ONE frame with
// libx264 (crf, preset veryfast, PyAV's default slice threading), decode it back and convert to
// rgb24 the same way. Returned unchanged (no crop) when crf == 0 or min(H, W) < 2.
// image: u8 [H, W, 3]. Needs FFmpeg (throws in a build without it, unless nothing is to be done).
// Note: with slice threads x264 cuts the frame into one slice per thread, so the exact pixels
// depend on the CPU count (in the reference too); `threads` > 0 fixes it.
Tensor crf_recompress(const Tensor& image, int crf, int threads = 0);

// resize_and_center_crop: image [H, W, 3] or frames [F, H, W, 3] (u8 or floating, any scale) ->
// f32 [1, 3, F, height, width] (F = 1 for an image), values on the input's scale.
//   scale = max(height / H, width / W); new size = ceil(H * scale) x ceil(W * scale);
//   bilinear, align_corners = false, no antialias (ops::interpolate);
//   crop offsets (new - target) // 2.
Tensor resize_and_center_crop(const Tensor& image, int64_t height, int64_t width);

// resize_and_reflect_pad (the HDR IC-LoRA's fit): image [H, W, 3] or frames [F, H, W, 3] ->
// f32 [1, 3, F, height, width], values on the input's scale. The aspect ratio is kept and the rest
// padded at the bottom and right:
//   no resize when the target is at least the source in both dims; else scale =
//   min(height / H, width / W), new size round(H * scale) x round(W * scale) (Python's round: half
//   to even), bilinear, align_corners = false, no antialias;
//   pad (0, width - new_w, 0, height - new_h): reflect when both pads are smaller than the resized
//   size, else replicate.
Tensor resize_and_reflect_pad(const Tensor& image, int64_t height, int64_t width);

// [0, 255] -> [-1, 1]: x / 127.5 - 1 (as x * (1 / 127.5f) - 1, torch's CUDA division by a
// scalar, the device the reference prepares images on), then cast to dtype.
Tensor normalize_to_unit_range(const Tensor& x, DType dtype = DType::F32);

// How a conditioning is fitted to the target size (the reference's ResizeMode).
enum class ResizeMode { CenterCrop, ReflectPad };

// HDR conditioning frames as the reference's load_exr_conditioning_hdr prepares EXR pixels:
// frames [F, H, W, 3] or an image [H, W, 3], floating (scene-linear in `cs`'s primaries, or ACEScct
// codes for ACESCCT) -> resized to height x width by `mode` (in linear light) -> the VAE working
// space (hdr_to_working_space with ACEScct from the space's primaries; ACESCCT codes clamped to
// [0, 1]) -> [-1, 1] -> f32 [1, 3, F, height, width] cast to `dtype`.
Tensor prepare_hdr_frames(const Tensor& frames, int64_t height, int64_t width, HdrColorSpace cs, ResizeMode mode,
                          DType dtype = DType::F32);

// The whole path (load_image_and_preprocess): read_image -> crf_recompress -> resize and center
// crop -> normalise: [1, 3, 1, height, width] in [-1, 1].
Tensor load_image_conditioning(const std::string& path, int64_t height, int64_t width, int crf,
                               DType dtype = DType::F32);

}  // namespace ltx::media
