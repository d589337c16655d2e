#pragma once
// CUDA reductions and softmax (src/ops/reduce.h semantics; `dims` normalised by the caller:
// sorted, unique, in range). x f32 or bf16, any strides (laid out as [A, R, B] by the plan
// shared with the CPU, backend/common/reduce_plan.h); results have x's dtype (argmax: i64). Sums,
// means and variances accumulate in double like the CPU's; max/min propagate NaN; softmax subtracts the row
// max and sums the exponentials in double.
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "op_types/reduce.h"

namespace ltx::cuda {

Tensor reduce(ops::ReduceOp op, const Tensor& x, const std::vector<int>& dims, bool keepdim);
Tensor var(const Tensor& x, const std::vector<int>& dims, int64_t correction, bool keepdim,
           bool take_sqrt);
Tensor argmax(const Tensor& x, int dim, bool keepdim);
Tensor softmax(const Tensor& x, int dim, bool log);

}  // namespace ltx::cuda
