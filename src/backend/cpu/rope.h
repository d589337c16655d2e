#pragma once
#include "core/tensor.h"
#include "ops/rope.h"

namespace ltx::cpu {

// Arguments validated by ops::apply_rope; cos/sin already expanded to x's leading dims.
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout);

}  // namespace ltx::cpu
