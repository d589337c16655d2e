#pragma once
// Float RGB frames -> 8-bit pixels for encoding, with the reference's own arithmetic
// (ltx_core/color/yuv.py): no libswscale on this path.
//
// rgb_to_yuv420_bt709, per frame of [H, W, 3] values in [0, 1] (H and W even):
//   Y  = 0.2126 R + 0.7152 G + 0.0722 B,  Cb = -0.1146 R - 0.3854 G + 0.5 B,
//   Cr = 0.5 R - 0.4542 G - 0.0458 B;
//   Cb, Cr averaged over each 2x2 block (the four pixels summed row by row, then / 4);
//   limited range: Y * 219 + 16, C * 224 + 128; clamp to [0, 255]; truncating cast to uint8.
// rgb_to_uint8: clamp to [0, 1], * 255, truncating cast (the reference's rgb24 converter).
//
// The reference computes in the dtype of the decoded frames. f32 frames are computed in f32; for
// bf16 / f16 frames every intermediate is rounded to that dtype as torch does (dot products
// accumulate in f32 and round once, as a GEMM does); f64 frames are computed in f64.
// NaN maps to 0.
#include <cstdint>

#include "core/tensor.h"

namespace ltx::media {

struct Yuv420Frames {
  Tensor y;  // u8 [F, H, W]
  Tensor u;  // u8 [F, H / 2, W / 2]  (Cb)
  Tensor v;  // u8 [F, H / 2, W / 2]  (Cr)
};

// frames: [F, H, W, 3] or [H, W, 3], a floating dtype, any strides, any device (copied to the
// CPU). H and W must be even.
Yuv420Frames rgb_to_yuv420_bt709(const Tensor& frames);

// One frame [H, W, 3] (CPU, floating dtype) into caller-owned planes with the given row strides
// in bytes: Y is H x W, U and V are H/2 x W/2. Used by the MP4 writer to fill its encoder frames.
void rgb_to_yuv420_bt709(const Tensor& frame, uint8_t* y, int64_t y_stride, uint8_t* u,
                         int64_t u_stride, uint8_t* v, int64_t v_stride);

// The 10-bit form of the HLG master (ltx_core/color/yuv.py: rgb_to_yuv420p10 with BT.2020
// non-constant luminance, limited range): one f32 frame [H, W, 3] of signal values in [0, 1] into
// u16 planes (row strides in elements). The same steps in f32 with the BT.2020 matrix (Kr 0.2627,
// Kg 0.6780, Kb 0.0593; chroma rows / 1.8814 and / 1.4746), Y * 876 + 64, C * 896 + 512, rounded
// half to even and clamped to [0, 1023].
void rgb_to_yuv420p10_bt2020(const Tensor& frame, uint16_t* y, int64_t y_stride, uint16_t* u,
                             int64_t u_stride, uint16_t* v, int64_t v_stride);

// Float frames [..., 3] in [0, 1] (any shape, floating dtype) -> u8 of the same shape.
Tensor rgb_to_uint8(const Tensor& frames);

}  // namespace ltx::media
