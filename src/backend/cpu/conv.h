#pragma once
// CPU convolutions (f32), one implementation for 1-3 spatial dims: a rank-R problem is run as a
// 3-D one with leading size-1 dims. Forward convs are im2col tiles + cblas_sgemm, with the im2col
// scratch bounded per tile (output positions x a block of input channels, a few MB); 1x1 kernels
// with unit stride and no padding are one GEMM per (batch, group); depthwise convs (one input and
// one output channel per group) are direct loops. Transposed convs are GEMM + col2im over tiles of
// input positions. Arguments are checked by ltx::ops (src/ops/conv.cpp).
#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "op_types/conv.h"

namespace ltx::cpu {

// x [N, C, *spatial], w [O, C / groups, *kernel], bias [O] or undefined.
Tensor conv_nd(const Tensor& x, const Tensor& w, const Tensor& bias, const ops::ConvSpec& spec);
// x [N, C, *spatial], w [C, O / groups, *kernel], bias [O] or undefined.
Tensor conv_transpose_nd(const Tensor& x, const Tensor& w, const Tensor& bias,
                         const ops::ConvSpec& spec);

// Tile limits (defaults: 1024 output columns, 1 Mi floats of scratch per tile). Tests shrink
// them to exercise tiling on small tensors; values < 1 restore the defaults.
void set_conv_tile_limits(int64_t max_columns, int64_t max_scratch_floats);

}  // namespace ltx::cpu
