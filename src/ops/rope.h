#pragma once
// Rotary position embeddings (LTX's apply_rotary_emb), applied with precomputed cos/sin.
#include <array>

#include "core/tensor.h"
#include "op_types/rope.h"

namespace ltx::ops {

// x [..., D] (D even), e.g. [B, H, T, Dh]; cos and sin have equal shapes whose last dim is D/2
// (Split) or D (Interleaved) and whose leading dims broadcast to x's (e.g. [B, 1, T, .] or
// [T, .]). Returns a new contiguous tensor shaped like x:
//   Split:        y[i] = x[i]*cos[i] - x[i+D/2]*sin[i];  y[i+D/2] = x[i+D/2]*cos[i] + x[i]*sin[i]
//   Interleaved:  y[2i] = x[2i]*cos[2i] - x[2i+1]*sin[2i]; y[2i+1] = x[2i+1]*cos[2i+1] + x[2i]*sin[2i+1]
// CPU: f32, each output is two fp32 products and one add/subtract (no FMA), as the reference's
// fp32 mul + addcmul rounds them. The reference casts cos/sin to the model dtype first; callers
// that want that round cos/sin themselves.
Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, RopeLayout layout);

// ---- the transformer attention's q / k preparation ----

// rms_norm over the last dim of x [B, T, D] (weight [D] or undefined), then the rotary embedding
// of `heads` attention heads of D / heads:
//   Interleaved: apply_rope(n, cos, sin, Interleaved), tables broadcasting to [B, T, D]; the
//                result is [B, T, D].
//   Split:       apply_rope(n.view({B, T, heads, D / heads}).transpose(1, 2), cos, sin, Split),
//                tables broadcasting to [B, heads, T, D / heads / 2]; the result is [B, heads, T,
//                D / heads], contiguous (the attention's head-major layout).
// Bit-identical to rms_norm_rope_unfused (that composition) on each device: the normalised value
// is rounded to x's dtype as rms_norm stores it, then rotated with apply_rope's arithmetic. CUDA:
// one kernel when the rows take the vector path (backend/cuda/rope.h), the unfused ops otherwise;
// the CPU runs the composition.
Tensor rms_norm_rope(const Tensor& x, const Tensor& weight, double eps, const Tensor& cos,
                     const Tensor& sin, RopeLayout layout, int64_t heads);
// The composition rms_norm_rope reproduces (the reference of the tests).
Tensor rms_norm_rope_unfused(const Tensor& x, const Tensor& weight, double eps, const Tensor& cos,
                             const Tensor& sin, RopeLayout layout, int64_t heads);

// Self-attention's q and k, prepared with one pair of tables: {rms_norm_rope(q, q_weight, ...),
// rms_norm_rope(k, k_weight, ...)}, bit for bit. q and k [B, T, D] of one shape, dtype and device.
// CUDA: one launch that reads each token's cos / sin once for both rows, when both take the
// fused kernel (backend/cuda/rope.h); the two calls otherwise. CPU: the two calls.
QkRope qk_rms_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                        const Tensor& k_weight, double eps, const Tensor& cos, const Tensor& sin,
                        RopeLayout layout, int64_t heads);

// ---- 3-D absolute RoPE (the diffusion video decoder's neighborhood attention) ----

// The composition: three apply_rope (Interleaved) on the t / h / w chunks of x + concat. A new
// contiguous tensor of x's dtype.
Tensor apply_rope_3d(const Tensor& x, const Rope3dTables& rope);

// The attention's q / k preparation in one pass: per row of D,
//   q' = apply_rope_3d(rms_norm(q, q_weight, eps) * q_scale, rope)
//   k' = apply_rope_3d(rms_norm(k, k_weight, eps), rope)
// q, k [B, T, H, W, heads, D] of one shape, dtype and device, any strides (e.g. narrows of a fused
// qkv projection); q_weight / k_weight [D] or undefined; q_scale is rounded to f32 as ops::mul
// does with a double. Results are new contiguous tensors of q's dtype, bit-identical to
// qk_norm_rope_3d_unfused on the same device: the same per-element roundings, including the
// roundings to bf16 storage between the unfused ops, and on CUDA the rms_norm kernel's order of
// the sum of squares. CUDA: one launch for both q and k.
QkRope qk_norm_rope_3d(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                       const Tensor& k_weight, double eps, double q_scale,
                       const Rope3dTables& rope);

// The same, written over q and k (the q / k parts of a fused projection, say: no second pair of
// buffers). q and k must not overlap; every row's values are read before they are written.
void qk_norm_rope_3d_(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                      const Tensor& k_weight, double eps, double q_scale, const Rope3dTables& rope);

// The unfused ops composition qk_norm_rope_3d reproduces (rms_norm -> mul (q only) ->
// apply_rope_3d): the reference of the tests.
QkRope qk_norm_rope_3d_unfused(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                               const Tensor& k_weight, double eps, double q_scale,
                               const Rope3dTables& rope);

}  // namespace ltx::ops
