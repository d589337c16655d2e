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

namespace ltx::cpu {

struct ConvSpec {
  int rank = 0;  // spatial dims, 1-3; the arrays below use entries [0, rank)
  std::array<int64_t, 3> stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1},
      output_padding{0, 0, 0};
  int64_t groups = 1;
};

// The sizes of one convolution with its spatial dims padded to 3 (missing leading dims of size
// 1): batch N, channels C / O in G groups of Cg / Og, per axis input / output size, kernel,
// stride, padding, dilation; K kernel taps, Pin / Pout positions per channel. `transposed`: w is
// [C, O / groups, *kernel] and the output size follows conv_transpose. Shared by the backends.
struct ConvGeometry {
  int64_t N = 0, C = 0, O = 0, G = 1, Cg = 0, Og = 0;
  int64_t in[3] = {}, out[3] = {}, k[3] = {}, s[3] = {}, p[3] = {}, d[3] = {};
  int64_t K = 1, Pin = 1, Pout = 1;
};
ConvGeometry conv_geometry(const Tensor& x, const Tensor& w, const ConvSpec& spec, bool transposed);
// [N, O, *out] with the conv's own rank.
Shape conv_output_shape(const ConvGeometry& g, int rank);

// x [N, C, *spatial], w [O, C / groups, *kernel], bias [O] or undefined.
Tensor conv_nd(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvSpec& spec);
// x [N, C, *spatial], w [C, O / groups, *kernel], bias [O] or undefined.
Tensor conv_transpose_nd(const Tensor& x, const Tensor& w, const Tensor& bias,
                         const ConvSpec& spec);

// Tile limits (defaults: 1024 output columns, 1 Mi floats of scratch per tile). Tests shrink
// them to exercise tiling on small tensors; values < 1 restore the defaults.
void set_conv_tile_limits(int64_t max_columns, int64_t max_scratch_floats);

}  // namespace ltx::cpu
