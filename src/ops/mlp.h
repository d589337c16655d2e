#pragma once
// Fused MLP blocks.
#include "core/tensor.h"

namespace ltx::ops {

// The SwiGLU MLP added into a residual stream (the diffusion decoder's block MLP):
//   [gate | up] = y @ w_gate_up^T,  residual += (silu(gate) * up) @ w_down^T
// residual [n, C] contiguous, updated in place; y [n, C] with a dense last dim (any row stride);
// w_gate_up [2 H, C] (the gate rows first); w_down [C, H]; no biases. All on one device.
// CPU (f32 only): exactly swiglu_add_unfused. CUDA: the fused Hopper kernel
// (backend/cuda/mlp.h: bf16 everywhere, C in {64, 128, 256}, H a multiple of 64, an sm_90a
// image) never stores the hidden activations and rounds where the unfused ops round (gate / up
// and the down product to bf16, silu as silu_mul computes it, the residual sum as add_), but its
// products accumulate in another order than cuBLAS's: it matches the unfused path to bf16
// accuracy, not bit for bit. Everything else on CUDA runs swiglu_add_unfused.
void swiglu_add_(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                 const Tensor& w_down);

// The unfused composition: add_(residual, linear(silu_mul(gate, up), w_down)) with
// gate | up = linear(y, w_gate_up) (every intermediate stored in the weights' dtype).
void swiglu_add_unfused(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                        const Tensor& w_down);

// Whether swiglu_add_ takes the fused kernel for these operands (y undefined: a y laid out like
// the residual): callers that compute y in row chunks (to bound the memory of the unfused path's
// [rows, 2 H] activations) can take far larger chunks then.
bool swiglu_add_fuses(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                      const Tensor& w_down);

}  // namespace ltx::ops
