#pragma once
// Normalisations over f32 tensors with fp32 outputs; statistics are computed in double and eps is
// added inside the square root, as torch does. On CUDA x, weight and bias may also be bf16 (the
// result has x's dtype; rms_norm / layer_norm sum in f32 there, see backend/cuda/norm.h).
// `weight` / `bias` may be undefined Tensors (no affine part).
#include <cstdint>

#include "core/tensor.h"
#include "ops/summed.h"

namespace ltx::ops {

// Over the last dim D: y = x * rsqrt(mean(x^2) + eps) * weight  (torch.nn.functional.rms_norm).
// weight: [D] or undefined.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);

// Fused AdaLN-zero input (the reference's ada_zero function): rms_norm(x, no weight, eps) *
// (1 + scale) + shift over the last dim. scale and shift broadcast to x's shape (e.g. [B, 1, D]
// per sample or [B, T, D] per token for x [B, T, D]); the result has x's shape and the dtype of
// modulate(rms_norm(x), scale, shift), with which it agrees bit for bit on each backend (the
// normalised value is rounded to x's dtype before the modulation, as the unfused pair stores it).
// With `weight` ([D], the diffusion decoder's weighted norms): modulate(rms_norm(x, weight, eps),
// scale, shift), bit for bit as well. scale and shift may each be a Summed{a, b} (the AdaLN table
// row + the per-token timestep slice): bit-identical to the same call with add(a, b), one kernel
// on CUDA (the CPU materialises the sum).
Tensor rms_norm_modulate(const Tensor& x, const Summed& scale, const Summed& shift, double eps,
                         const Tensor& weight = Tensor());

// rms_norm_modulate's result written into `out` (x's shape and the result dtype; any strides),
// the same bits. On CUDA, x and out that are both the same kind of row view (e.g. a W-narrowing
// of contiguous [B, T, H, W, C] tensors) are read and written in place, without copies.
void rms_norm_modulate_into(const Tensor& out, const Tensor& x, const Tensor& scale,
                            const Tensor& shift, double eps, const Tensor& weight = Tensor());

// A gated residual and the AdaLN input of the next step in one op (the transformer block's
// gated_add followed by ada_zero of its result): x_next = gated_add(x, y, gate) and h =
// rms_norm_modulate(x_next, scale, shift, eps), each bit-identical to those two ops. On CUDA the
// bf16 vector case is one pass (x_next is not read back); elsewhere it is the two ops.
struct ResidualNorm {
  Tensor x;  // the updated residual stream
  Tensor h;  // the modulated norm of it
};
ResidualNorm gated_add_rms_norm_modulate(const Tensor& x, const Tensor& y, const Summed& gate,
                                         const Summed& scale, const Summed& shift, double eps);
// The same with two modulations of the one norm (the block's audio <-> video attentions read the
// video state through their own AdaLN values): h = rms_norm_modulate(x_next, scale, shift, eps)
// and h2 = rms_norm_modulate(x_next, scale2, shift2, eps), each bit-identical to those ops; one
// pass on CUDA where both fuse.
struct ResidualNorm2 {
  Tensor x, h, h2;
};
ResidualNorm2 gated_add_rms_norm_modulate2(const Tensor& x, const Tensor& y, const Summed& gate,
                                           const Summed& scale, const Summed& shift,
                                           const Summed& scale2, const Summed& shift2, double eps);

// Over an arbitrary dim, no affine: y = x / sqrt(mean(x^2, dim) + eps)  (the video VAE's
// PixelNorm, which normalises over channels, dim 1).
Tensor rms_norm_dim(const Tensor& x, int64_t dim, double eps);

// silu(rms_norm_dim(x, dim, eps)) in one pass (the video VAE's PixelNorm + SiLU), bit for bit on
// each backend: the normalised value is rounded to x's dtype before ops::silu's function, as the
// unfused pair stores it. The result has rms_norm_dim's dtype and layout.
// bias (optional, x.size(dim) values): the same for x + bias, the sum rounded to x's dtype as
// ops::add stores it (the VAE's conv1 output before its bias, then norm2 + SiLU; on CUDA the add
// happens inside the norm's pass over channels-last bf16 / f32 activations, elsewhere first).
// x by value: pass std::move(x) when it is the last use, so that the unfused add releases it.
Tensor rms_norm_dim_silu(Tensor x, int64_t dim, double eps, const Tensor& bias = {});

// The VAE ResNet block's skip connection and the next PixelNorm + SiLU in one op: x = (x + bias)
// + residual in place (add_then_add_ with bias along dim: each sum rounded to x's dtype), then
// returns rms_norm_dim_silu(x, dim, eps), bit for bit those two ops on each backend. bias: x.size
// (dim) values; residual: x's shape. On CUDA one pass over channels-last bf16 rows of at most 1024
// channels with a residual in x's layout (the sum is stored, never read back); elsewhere the ops
// in turn.
Tensor add_then_add_rms_norm_dim_silu_(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                       int64_t dim, double eps);

// Over the last dim D with the biased variance: y = (x - mean) / sqrt(var + eps) * weight + bias.
// weight, bias: [D] or undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);

// x: [N, C, *spatial]. Mean and biased variance per (n, group) over C / num_groups channels and
// all spatial positions; then per-channel affine. weight, bias: [C] or undefined
// (torch.nn.functional.group_norm).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps);

}  // namespace ltx::ops
