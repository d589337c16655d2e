#pragma once
// CPU (fp32 in, double accumulation) reductions and softmax. `dims` are normalised by the caller
// (src/ops/reduce.cpp): sorted, unique, in range; empty means "reduce nothing".
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "op_types/reduce.h"

namespace ltx::cpu {

Tensor reduce(ops::ReduceOp op, const Tensor& x, const std::vector<int>& dims, bool keepdim);
Tensor var(const Tensor& x, const std::vector<int>& dims, int64_t correction, bool keepdim,
           bool take_sqrt);
Tensor argmax(const Tensor& x, int dim, bool keepdim);
Tensor softmax(const Tensor& x, int dim, bool log);

}  // namespace ltx::cpu
