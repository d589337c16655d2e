#pragma once
// The convolutions' vocabulary, shared by the dispatch layer (ops/conv.h) and both backends: the
// spec of one convolution and its geometry (the shape rule of torch's convNd / conv_transposeNd).
#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace ltx::ops {

struct ConvSpec {
  int rank = 0;  // spatial dims, 1-3; the arrays below use entries [0, rank)
  std::array<int64_t, 3> stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1},
      output_padding{0, 0, 0};
  int64_t groups = 1;
};

// The sizes of one convolution with its spatial dims padded to 3 (missing leading dims of size
// 1): batch N, channels C / O in G groups of Cg / Og, per axis input / output size, kernel,
// stride, padding, dilation; K kernel taps, Pin / Pout positions per channel. `transposed`: w is
// [C, O / groups, *kernel] and the output size follows conv_transpose.
struct ConvGeometry {
  int64_t N = 0, C = 0, O = 0, G = 1, Cg = 0, Og = 0;
  int64_t in[3] = {}, out[3] = {}, k[3] = {}, s[3] = {}, p[3] = {}, d[3] = {};
  int64_t K = 1, Pin = 1, Pout = 1;
};
ConvGeometry conv_geometry(const Tensor& x, const Tensor& w, const ConvSpec& spec, bool transposed);
// [N, O, *out] with the conv's own rank.
Shape conv_output_shape(const ConvGeometry& g, int rank);

}  // namespace ltx::ops
