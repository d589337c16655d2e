#pragma once
#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace ltx::cpu {

// Arguments validated by ops::neighborhood_attention_3d (f32, [B, T, H, W, heads, D]).
Tensor neighborhood_attention_3d(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::array<int64_t, 3>& kernel, float scale);

}  // namespace ltx::cpu
