#pragma once
// CUDA kernels for the shape ops (any dtype: element bytes are moved, never converted). Arguments
// are checked and the index maps built by src/ops/shape.cpp; see cpu::gather_by_maps for the
// contract, which these follow exactly.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "op_types/pad_rule.h"

namespace ltx::cuda {

// out[o_0, ..., o_{n-1}] = x[maps[0][o_0], ..., maps[n-1][o_{n-1}]], -1 = `fill` (converted to
// x's dtype). The maps are uploaded once per call (identity maps are not uploaded).
Tensor gather_by_maps(const Tensor& x, const std::vector<std::vector<int64_t>>& maps, double fill);

// ops::pad: out (of `out_shape`) = x with each listed dim (its index, its rule) read through
// ops::pad_source_index, -1 = `fill`; the rules are kernel arguments, so nothing is uploaded.
Tensor gather_by_pad_rules(const Tensor& x, const Shape& out_shape,
                           const std::vector<std::pair<int, ops::PadRule>>& rules, double fill);

// torch.gather with the index values already checked (host copy `idx`, row-major over
// index_shape).
Tensor gather(const Tensor& x, int dim, const Shape& index_shape, const std::vector<int64_t>& idx);

}  // namespace ltx::cuda
