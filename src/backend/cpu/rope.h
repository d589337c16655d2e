#pragma once
#include "core/tensor.h"
#include "op_types/rope.h"

namespace ltx::cpu {

// Arguments validated by ops::apply_rope; cos/sin already expanded to x's leading dims.
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout);

// Arguments validated by ops::qk_norm_rope_3d (f32 everything); q_scale already rounded to f32.
// Per row: rms_norm's sum and scale, its products, the product with q_scale (q only) and
// apply_rope's rotation, each in the unfused ops' f32 arithmetic.
ops::QkRope qk_norm_rope_3d(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                            const Tensor& k_weight, double eps, float q_scale,
                            const ops::Rope3dTables& rope);

}  // namespace ltx::cpu
