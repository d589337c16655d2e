#pragma once
#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "op_types/neighborhood_attention.h"

namespace ltx::cpu {

// Arguments validated by ops::neighborhood_attention_3d (f32, [B, T, H, W, heads, D]; cols
// within W).
Tensor neighborhood_attention_3d(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::array<int64_t, 3>& kernel, float scale,
                                 const ops::QueryColumns& cols = {});

}  // namespace ltx::cpu
