#pragma once
// How a reduction sees its input, shared by the CPU and CUDA backends: the tensor laid out as a
// contiguous [A, R, B] block with the reduced dims in R (a permuted copy only when the reduced
// dims are not adjacent), plus the result's shape. Works on any device (views and copies only).
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ltx {

// Sizes of [A, R, B] where R spans dims [d0, d1] of `shape`.
struct Split3 {
  int64_t a = 1, r = 1, b = 1;
};

template <typename ShapeT>
Split3 split3(const ShapeT& shape, int d0, int d1) {
  Split3 s;
  for (int d = 0; d < shape.size(); ++d) {
    if (d < d0) {
      s.a *= shape[d];
    } else if (d <= d1) {
      s.r *= shape[d];
    } else {
      s.b *= shape[d];
    }
  }
  return s;
}

// x laid out as contiguous [A, R, B] with the reduced dims in R, plus the result's shape.
struct ReducePlan {
  Tensor data;
  Split3 s;
  Shape out_shape;
};

inline ReducePlan plan_reduce(const Tensor& x, const std::vector<int>& dims, bool keepdim) {
  ReducePlan p;
  const int nd = x.dim();
  std::vector<bool> reduced(static_cast<size_t>(nd), false);
  for (int d : dims) reduced[d] = true;
  for (int d = 0; d < nd; ++d) {
    if (!reduced[d]) {
      p.out_shape.push_back(x.size(d));
    } else if (keepdim) {
      p.out_shape.push_back(1);
    }
  }
  if (dims.empty()) {
    p.data = x.contiguous();
    p.s = {x.numel(), 1, 1};
    return p;
  }
  const bool consecutive = dims.back() - dims.front() + 1 == static_cast<int>(dims.size());
  if (consecutive) {
    // Reduced dims form one block of a contiguous layout: no permutation copy needed.
    p.data = x.contiguous();
    p.s = split3(x.shape(), dims.front(), dims.back());
    return p;
  }
  std::vector<int64_t> perm;
  for (int d = 0; d < nd; ++d)
    if (!reduced[d]) perm.push_back(d);
  const int kept = static_cast<int>(perm.size());
  for (int d : dims) perm.push_back(d);
  p.data = x.permute(perm).contiguous();
  p.s = split3(p.data.shape(), kept, nd - 1);
  return p;
}

}  // namespace ltx
