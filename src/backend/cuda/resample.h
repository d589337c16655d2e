#pragma once
// CUDA interpolation (arguments checked by ltx::ops, src/ops/resample.cpp). The index tables are
// the CPU's (backend/common/interp_tables.h) and the per-element arithmetic is the CPU's
// expression with each product and sum rounded on its own, so f32 results are bit-identical to
// the CPU op. f32 or bf16 storage, f32 math, output in x's dtype.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "op_types/resample.h"

namespace ltx::cuda {

Tensor interpolate(const Tensor& x, const std::vector<int64_t>& output_size,
                   const std::vector<double>& scales, ops::InterpMode mode, bool align_corners);

}  // namespace ltx::cuda
