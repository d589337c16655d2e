#pragma once
// CPU implementations of the norms; arguments are checked by src/ops/norm.cpp.
#include <cmath>
#include <cstdint>

#include "core/tensor.h"

namespace ltx::cpu {

// 1 / sqrt(mean + eps) rounded to f32; mean and eps in double (every norm's row scale; also the
// fused qk_norm_rope_3d's, which must agree with rms_norm bit for bit).
inline float rstd_of(double sum_sq, int64_t n, double eps) {
  return static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// rms_norm(x) then modulate (the CPU's f32 composition: already exact per op, and the CPU is not
// the speed target).
Tensor rms_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, double eps,
                         const Tensor& weight);
// silu: ops::silu's function applied to each result (rms_norm_dim_silu; f32: no rounding between).
Tensor rms_norm_dim(const Tensor& x, int dim, double eps, bool silu = false);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps);

}  // namespace ltx::cpu
