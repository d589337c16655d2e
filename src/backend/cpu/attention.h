#pragma once
#include "core/tensor.h"

namespace ltx::cpu {

// Arguments validated by ops::scaled_dot_product_attention; `mask` is undefined or already
// expanded to [B, H, Tq, Tk] (stride-0 views), of dtype Bool, U8 or F32.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, float scale);

}  // namespace ltx::cpu
