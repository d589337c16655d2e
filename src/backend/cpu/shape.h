#pragma once
// CPU kernels for the shape ops (any dtype: they copy element bytes). Arguments are checked by
// ltx::ops (src/ops/shape.cpp); these only assume what those checks guarantee.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "ops/shape.h"

namespace ltx::cpu {

// The engine behind most shape ops: a new contiguous tensor with
//   out[o_0, ..., o_{n-1}] = x[maps[0][o_0], ..., maps[n-1][o_{n-1}]],
// where maps[d].size() is the output size of dim d and an entry of -1 writes `fill` (converted to
// x's dtype) instead of reading x. maps.size() == x.dim(); entries index x's dims (x may be
// strided).
Tensor gather_by_maps(const Tensor& x, const std::vector<std::vector<int64_t>>& maps, double fill);

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, ops::PadMode mode, double value);
// `index` is 1-D and its values are checked here (CPU-resident data).
Tensor index_select(const Tensor& x, int dim, const Tensor& index);
Tensor gather(const Tensor& x, int dim, const Tensor& index);
// repeats.size() >= x.dim().
Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats);
// repeats.size() == x.size(dim), all >= 0.
Tensor repeat_interleave(const Tensor& x, const std::vector<int64_t>& repeats, int dim);
Tensor flip(const Tensor& x, const std::vector<int>& dims);

}  // namespace ltx::cpu
