#pragma once
// Fused scaled-dot-product attention on CUDA (src/ops/attention.h semantics): flash-style, one
// pass over the keys with an online softmax, so no Tq x Tk score matrix is ever stored.
//   q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv]: f32 or bf16, any strides (the
//   [B, T, H, D] -> [B, H, T, D] transposed views are read in place); D, Dv <= 128.
//   mask: undefined, bool/u8 (nonzero = attend) or f32/bf16 (added to the scaled logits), already
//   expanded to [B, H, Tq, Tk] by the caller (stride 0 where broadcast).
//   result: contiguous [B, H, Tq, Dv], bf16 when q, k and v are all bf16, else f32.
// Scores, softmax statistics and the weighted sum are f32. A row whose logits are all -inf gets
// zeros (torch's _safe_softmax), like the CPU.
#include "core/tensor.h"

namespace ltx::cuda {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, float scale);

}  // namespace ltx::cuda
