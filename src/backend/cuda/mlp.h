#pragma once
// The fused SwiGLU MLP on CUDA (ops::swiglu_add_'s contract, src/ops/mlp.h):
//   residual [n, C] += (silu(y Wg^T) * (y Wu^T)) Wd^T,  w_gate_up = [Wg; Wu] [2 H, C], w_down [C, H].
// mlp.cu: a Hopper (sm_90a) kernel in the FlashAttention-3 mould. A block owns 128 rows of
// y (two consumer warpgroups of 64 rows, y in shared memory for the whole block) and walks the
// hidden dim in chunks of 64: per chunk G = y Wg_c^T and U = y Wu_c^T (wgmma, both operands from
// shared memory), P = bf16(silu(bf16 G) * bf16 U) in registers (silu_mul's exact per-element
// math), O += P Wd_c^T (wgmma with P from registers); the weight chunks stream through a ring of
// shared-memory slots loaded by a TMA producer warpgroup. At the end O is rounded to bf16, added to
// the residual in f32 and rounded to bf16 (add_'s rounding). The hidden activations never reach
// global memory. Accumulation is f32 in the tensor cores' order, so the result matches cuBLAS +
// silu_mul + cuBLAS + add_ to bf16 accuracy, not bit for bit.
#include "core/tensor.h"

namespace ltx::cuda {

// Whether the fused kernel takes these operands: all bf16 on one device that runs the wgmma
// kernels (wgmma_attention_available), C in {64, 128, 256}, H a positive multiple of 64, n > 0,
// residual contiguous, y / weights with a dense last dim, 16-byte aligned rows (TMA).
bool swiglu_wgmma_applies(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                          const Tensor& w_down);

// The kernel itself; the caller has checked that it applies. Runs on the current stream.
void swiglu_wgmma_add_(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                       const Tensor& w_down);

}  // namespace ltx::cuda
