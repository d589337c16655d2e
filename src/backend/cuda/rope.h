#pragma once
// CUDA rotary embeddings (src/ops/rope.h semantics). x f32 or bf16 with any strides; cos/sin f32
// or bf16, already expanded to x's leading dims by the caller (stride 0 where broadcast); the
// result is a new contiguous tensor of x's dtype. Each output is two products and one sum, each
// rounded on its own as on the CPU, so f32 results are bit-identical to the CPU's.
#include "core/tensor.h"
#include "op_types/rope.h"

namespace ltx::cuda {

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout);
// apply_rope takes a vector path (16-byte loads and stores, one thread per 8 table entries of a
// row) when the table width (D / 2 Split, D Interleaved) is a multiple of 8, x, cos and sin are f32
// or bf16 with unit stride along the last dim, their leading strides are multiples of 8 and their
// data 16-byte aligned; bit-identical to the general path (one thread per pair). Whether that path
// is taken for these arguments (cos/sin expanded as for apply_rope; for the tests):
bool rope_vectorised(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout);

// ops::rms_norm_rope (arguments validated there; cos / sin expanded to [B, T, D] Interleaved or
// [B, heads, T, D / heads / 2] Split) in one kernel: one block of row_threads(D) threads per row
// of x, the row staged in shared memory with rms_norm's vector-path statistics
// (stage_row_inv_rms), every element normalised as rms_norm stores it, then rotated as apply_rope
// does and stored as 16-byte vectors (Split: into the head-major [B, heads, T, Dh] layout).
// Bit-identical to the unfused CUDA ops. It runs when rms_norm_rope_fusable holds: x contiguous,
// D a multiple of 8 (Split: Dh a multiple of 16) and at most 32 KiB a row, x / weight / tables f32
// or bf16, 16-byte aligned, the tables' last stride 1 and other strides multiples of 8.
bool rms_norm_rope_fusable(const Tensor& x, const Tensor& weight, const Tensor& cos,
                           const Tensor& sin, ops::RopeLayout layout, int64_t heads);
Tensor rms_norm_rope(const Tensor& x, const Tensor& weight, double eps, const Tensor& cos,
                     const Tensor& sin, ops::RopeLayout layout, int64_t heads);

// ops::qk_rms_norm_rope in one launch (arguments validated there; tables expanded as above): the
// rms_norm_rope kernel with both rows of a token staged, each chunk's cos / sin loaded once for
// q and k. Bit-identical to two rms_norm_rope calls. It runs when both rows take that kernel
// (rms_norm_rope_fusable), q and k have one shape and dtype, and two rows fit 40 KiB.
bool qk_rms_norm_rope_fusable(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                              const Tensor& k_weight, const Tensor& cos, const Tensor& sin,
                              ops::RopeLayout layout, int64_t heads);
ops::QkRope qk_rms_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                             const Tensor& k_weight, double eps, const Tensor& cos, const Tensor& sin,
                             ops::RopeLayout layout, int64_t heads);

// The fused q / k preparation of ops::qk_norm_rope_3d (arguments validated there; q_scale
// already rounded to f32): one launch for both tensors, one warp per row of D. Each row is staged
// in shared memory as f32; its sum of squares replays rms_norm's block of row_threads(D) threads
// (warp_row_sum_sq, rms_row.cuh), then every pair gets rms_norm's products, the storage rounding,
// the product with q_scale (q) and its rounding, and apply_rope's rotation: bit-identical to the
// unfused CUDA ops. Head dims up to kQkNormRopeMaxDim (larger ones: ops falls back to the unfused
// ops).
inline constexpr int64_t kQkNormRopeMaxDim = 8192;
// Head dim 64 in bf16 (the LTX-2.5 diffusion decoder) with 16-byte aligned rows and a dense head
// dim takes a faster path: 8 lanes per row and 16-byte row loads and stores, the same sum of
// squares bit for bit (rope.cu says how). Whether q and k take it (for the tests):
bool qk_norm_rope_d64_path(const Tensor& q, const Tensor& k);
// out_q / out_k (both or neither): write the results there (q's shape and dtype, a dense head
// dim, any other strides; q and k themselves for in place: each row is read before it is
// written) instead of into new contiguous tensors.
ops::QkRope qk_norm_rope_3d(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                            const Tensor& k_weight, double eps, float q_scale,
                            const ops::Rope3dTables& rope, const Tensor* out_q = nullptr,
                            const Tensor* out_k = nullptr);

}  // namespace ltx::cuda
