#pragma once
// CPU interpolation kernels (f32). Arguments are checked by ltx::ops (src/ops/resample.cpp).
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "op_types/resample.h"

namespace ltx::cpu {

// x [N, C, *spatial] (1-3 spatial dims, any strides) -> [N, C, *output_size].
// scales: empty, or one per spatial dim where a value > 0 is torch's scale_factor for that dim.
Tensor interpolate(const Tensor& x, const std::vector<int64_t>& output_size,
                   const std::vector<double>& scales, ops::InterpMode mode, bool align_corners);

}  // namespace ltx::cpu
