#pragma once
// CPU implementations of the norms; arguments are checked by src/ops/norm.cpp.
#include <cstdint>

#include "core/tensor.h"

namespace ltx::cpu {

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
Tensor rms_norm_dim(const Tensor& x, int dim, double eps);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps);

}  // namespace ltx::cpu
