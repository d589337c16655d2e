#pragma once
// CUDA 3-D neighborhood attention (arguments checked by ltx::ops, src/ops/neighborhood_attention.cpp;
// the semantics are documented there). Output bf16 when q, k and v are bf16, else f32, contiguous
// [B, T, H, W, heads, Dv]. Two kernels:
//  - TensorCore (neighborhood_attention_mma.cu): bf16 q/k/v, D == Dv in {32, 64, 128}, dense head
//    dim and 16-byte aligned rows; fused flash-style (window keys streamed through shared memory,
//    online softmax, bf16 MMAs with f32 accumulation, probabilities rounded to bf16 for P V), so it
//    matches the f32 math to bf16 accuracy, not bit for bit.
//  - Wgmma (neighborhood_attention_wgmma.cu): Hopper only (compute capability 9.0 and a binary
//    built with the sm_90a image), bf16 q/k/v with D == Dv == 64, dense head dim, 16-byte aligned
//    rows and 16-byte multiple strides, (4 + Kh - 1) x (4 + Kw - 1) <= 208 (clipped to H, W); same
//    numerics as TensorCore (bf16 products, f32 accumulation, the window mask as an extra MMA
//    k-step), 1.3-2.1x faster on the decoder's shapes (bench/RESULTS.md).
//  - Simple (neighborhood_attention.cu): one warp per (query, head), the window's scores in shared
//    memory, f32 math on CUDA cores; any strides, f32 or bf16. The f32 (parity) path and fallback.
// Auto picks the wgmma kernel where it applies, else TensorCore where it applies, else Simple.
#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "op_types/neighborhood_attention.h"

namespace ltx::cuda {

enum class NeighborhoodKernel { Auto, TensorCore, Wgmma, Simple };

// cols: the query columns to compute (out [B, T, H, cols.count, heads, Dv]; checked by the op).
// The wgmma kernel computes only those; the others compute every column and keep those.
Tensor neighborhood_attention_3d(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::array<int64_t, 3>& kernel, float scale,
                                 NeighborhoodKernel which = NeighborhoodKernel::Auto,
                                 const ops::QueryColumns& cols = {});

// Whether the tensor-core kernel takes these operands (dtypes, head dims, layout, GPU arch).
// (Also false when a block's key box would exceed the kernel's group table, i.e. for windows far
// larger than the decoder's.)
bool tensor_core_neighborhood_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const std::array<int64_t, 3>& kernel);
// The tensor-core kernel (the caller checked that it applies and allocated `out`: contiguous bf16
// [B, T, H, W, heads, D]).
void tensor_core_neighborhood_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const std::array<int64_t, 3>& kernel, float scale,
                                        Tensor& out);

// Whether the wgmma kernel takes these operands (dtypes, head dim, layout, plane box, GPU, binary).
bool wgmma_neighborhood_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const std::array<int64_t, 3>& kernel);
// The wgmma kernel (the caller checked that it applies and allocated `out`: contiguous bf16
// [B, T, H, cols.count, heads, 64]).
void wgmma_neighborhood_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const std::array<int64_t, 3>& kernel, float scale,
                                  const ops::QueryColumns& cols, Tensor& out);

}  // namespace ltx::cuda
