#pragma once
// Fused scaled-dot-product attention on CUDA (src/ops/attention.h semantics): flash-style, one
// pass over the keys with an online softmax, so no Tq x Tk score matrix is ever stored.
//   q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv]: f32 or bf16, any strides (the
//   [B, T, H, D] -> [B, H, T, D] transposed views are read in place); D, Dv <= 256.
//   mask: undefined, bool/u8 (nonzero = attend) or f32/bf16 (added to the scaled logits), already
//   expanded to [B, H, Tq, Tk] by the caller (stride 0 where broadcast).
//   result: [B, H, Tq, Dv], bf16 when q, k and v are all bf16, else f32; contiguous from the
//   CUDA-core kernel, a transposed view of a contiguous [B, Tq, H, Dv] from the tensor-core one.
// A row whose logits are all -inf gets zeros (torch's _safe_softmax), like the CPU.
//
// Three kernels:
//  - Wgmma (attention_wgmma.cu): Hopper only (compute capability 9.0 and a binary built with the
//    sm_90a target), bf16 q/k/v, D == Dv in {64, 128}, the TensorCore kernel's layout rules and
//    numerics (f32 accumulation, P rounded to bf16); K/V streamed by TMA, warpgroup MMAs (wgmma).
//    Not for a broadcast (stride-0) dim or Tk == 0 (those go to TensorCore). Few query tiles over
//    many keys split the keys across blocks and merge the ranges (wgmma_attention's kv_splits);
//    many query tiles over a few keys run several tiles per block with the keys loaded once.
//  - TensorCore (attention_mma.cu): bf16 q/k/v only, D == Dv in {32, 64, 128, 256}, unit stride on the
//    head dim and 16-byte aligned rows. bf16 tensor-core MMAs with f32 accumulation; the softmax
//    probabilities are rounded to bf16 before the P.V product (as every fused bf16 attention
//    does), so it matches the f32 math to bf16 accuracy (~1e-3 relative), not bit for bit.
//  - Simple (attention.cu): every supported case, scores and softmax in f32 on CUDA cores. It is
//    the f32 path (parity runs) and the fallback.
// Auto picks the first that applies: Wgmma, TensorCore, Simple.
//
// head_gate_logits: undefined, or f32/bf16 logits already expanded to [B, Tq, H] (any strides):
// out[b, h, t, :] *= 2 * sigmoid(logits[b, t, h]), bit for bit as cuda::mul_2sigmoid applied to
// the ungated result (logits viewed as [B, H, Tq, 1]), with its result dtype (f32 for f32
// logits). Wgmma and TensorCore apply it in their epilogue: the bf16-rounded output times the
// gate (scalar::two_sigmoid), rounded to the result dtype; Simple runs the composition.
#include "core/tensor.h"

namespace ltx::cuda {

enum class AttentionKernel { Auto, Wgmma, TensorCore, Simple };

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, float scale,
                                    AttentionKernel kernel = AttentionKernel::Auto,
                                    const Tensor& head_gate_logits = Tensor());

// Whether the tensor-core kernels can stream `t`'s rows with 16-byte cp.async: a dense last dim,
// every other stride a multiple of 8 elements (of a 2-byte type) and a 16-byte aligned start.
bool bf16_rows_loadable(const Tensor& t);

// Whether the tensor-core kernel takes these operands (dtypes, head dims, layout, GPU arch).
bool tensor_core_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v);

// The tensor-core kernel itself (attention_mma.cu); the caller has checked that it applies and
// allocated `out`: [B, H, Tq, D] with a dense head dim, any other strides (even ones: D is even),
// bf16, or f32 with f32 gate logits. `gate`: undefined or the expanded [B, Tq, H] logits.
void tensor_core_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                           const Tensor& gate, float scale, Tensor& out);

// Whether device `device` runs the wgmma kernel: compute capability 9.0 and the sm_90a image
// loaded (the binary was built with 90a in CMAKE_CUDA_ARCHITECTURES). Cached per device.
bool wgmma_attention_available(int device);

// Whether the wgmma kernel takes these operands (dtypes, head dims, layout, GPU and binary).
bool wgmma_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v);

// The wgmma kernel itself (attention_wgmma.cu); same calling rules as tensor_core_attention.
// kv_splits: the key tiles split into that many ranges run as separate blocks and merged after
// (split keys, for few query tiles over many keys; not bit-identical to 1, the probabilities are
// rounded against each range's own running max), 1 = unsplit, 0 = wgmma_attention_auto_splits.
// q_tiles_per_block: 128-row query tiles per block, bit-identical to 1 (one tile), 0 =
// wgmma_attention_auto_q_tiles; ignored (1) when the keys are split. Above 1 only with Tk <= 384
// (an error otherwise): consecutive tiles of one (batch, head) over keys loaded once.
void wgmma_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                     const Tensor& gate, float scale, Tensor& out, int kv_splits = 0,
                     int q_tiles_per_block = 0);

// The key ranges Auto gives the wgmma kernel: 1 unless its (query tile, batch, head) blocks fill
// at most half the GPU's SMs and there are at least 8 key tiles of 128; then enough ranges to
// fill the SMs once, each of at least 4 tiles (at most 16).
int wgmma_attention_auto_splits(const Tensor& q, const Tensor& k);

// The query tiles per block Auto gives the wgmma kernel: 1 unless the keys fit its 3 stages (Tk <=
// 384) and there are at least two waves of (query tile, batch, head) blocks; then each (batch,
// head) gets max(1, SMs / (B H)) blocks with the query tiles dealt out evenly.
int wgmma_attention_auto_q_tiles(const Tensor& q, const Tensor& k);

}  // namespace ltx::cuda
