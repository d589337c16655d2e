#pragma once
// CPU kernels for the shape ops (any dtype: they copy element bytes). Arguments are checked by
// ltx::ops (src/ops/shape.cpp); these only assume what those checks guarantee.
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ltx::cpu {

// The engine behind most shape ops: a new contiguous tensor with
//   out[o_0, ..., o_{n-1}] = x[maps[0][o_0], ..., maps[n-1][o_{n-1}]],
// where maps[d].size() is the output size of dim d and an entry of -1 writes `fill` (converted to
// x's dtype) instead of reading x. maps.size() == x.dim(); entries index x's dims (x may be
// strided).
Tensor gather_by_maps(const Tensor& x, const std::vector<std::vector<int64_t>>& maps, double fill);

// torch.gather with the index values already checked (host copy `idx`, row-major over
// index_shape).
Tensor gather(const Tensor& x, int dim, const Shape& index_shape, const std::vector<int64_t>& idx);

}  // namespace ltx::cpu
