#pragma once
// CUDA 3-D neighborhood attention (arguments checked by ltx::ops, src/ops/neighborhood_attention.cpp;
// the semantics are documented there). One warp per (query, head): the lanes score the window's
// keys (scores kept in shared memory), the warp reduces max and sum, then the lanes split the
// value dims. q/k/v in any strides, f32 or bf16; f32 math; output bf16 when q, k and v are bf16,
// else f32, contiguous [B, T, H, W, heads, Dv].
#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace ltx::cuda {

Tensor neighborhood_attention_3d(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::array<int64_t, 3>& kernel, float scale);

}  // namespace ltx::cuda
