#pragma once
// Broadcast strides and dim coalescing for N operands that share one iteration space: the layout
// step of every elementwise loop, shared by the CPU loop (backend/cpu/elementwise_loop.h) and the
// CUDA kernels (backend/cuda/elementwise_loop.cuh).
#include <algorithm>
#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace ltx {

// Strides of `t` viewed as broadcast to `shape` (0 on missing leading dims and expanded dims).
inline Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides s;
  const int lead = shape.size() - t.dim();
  for (int i = 0; i < shape.size(); ++i) {
    const int d = i - lead;
    s.push_back(d < 0 || t.size(d) == 1 ? 0 : t.stride(d));
  }
  return s;
}

// N operands sharing one iteration space, after coalescing. ndim >= 1.
template <int N>
struct StridedLoop {
  int ndim = 0;
  std::array<int64_t, kMaxDims> size{};
  std::array<std::array<int64_t, kMaxDims>, N> stride{};
};

// Dims are visited in the memory order of operand 0 (the output: decreasing stride, ties in
// logical order), so operands that share a permuted dense layout (channels-last outputs and
// inputs, say) collapse to one dense dim like contiguous ones; for a row-major output this is the
// logical order. The iteration order never changes an elementwise result.
template <int N>
StridedLoop<N> coalesce(const Shape& shape, const std::array<Strides, N>& strides) {
  StridedLoop<N> L;
  std::array<int, kMaxDims> order{};
  for (int d = 0; d < shape.size(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.begin() + shape.size(),
                   [&](int a, int b) { return strides[0][a] > strides[0][b]; });
  for (int i = 0; i < shape.size(); ++i) {
    const int d = order[i];
    if (shape[d] == 1) continue;
    if (L.ndim > 0) {
      const int p = L.ndim - 1;
      bool mergeable = true;
      for (int k = 0; k < N; ++k) mergeable &= L.stride[k][p] == strides[k][d] * shape[d];
      if (mergeable) {
        L.size[p] *= shape[d];
        for (int k = 0; k < N; ++k) L.stride[k][p] = strides[k][d];
        continue;
      }
    }
    L.size[L.ndim] = shape[d];
    for (int k = 0; k < N; ++k) L.stride[k][L.ndim] = strides[k][d];
    ++L.ndim;
  }
  if (L.ndim == 0) {  // 0-d or all dims of size 1: one element
    L.ndim = 1;
    L.size[0] = 1;
  }
  return L;
}

}  // namespace ltx
