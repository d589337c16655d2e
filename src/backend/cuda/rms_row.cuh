#pragma once
// The per-row arithmetic of the CUDA RMSNorm (norm.cu), shared with the fused kernels that must
// agree with it bit for bit (rope.cu's qk_norm_rope_3d and rms_norm_rope): the block size per row
// length, the sum of squares term, the row scale, the rounding to the storage dtype between ops,
// the vector path's staged row and block sum, and the block sum replayed by one warp.
#include <cstdint>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/mma_primitives.cuh"
#include "core/dtype.h"
#include "core/dtype_bits.h"

namespace ltx::cuda {

inline constexpr int kMaxRowThreads = 256;

// The minimum resident blocks per SM the 4096-wide block-per-row kernels are compiled for
// (__launch_bounds__'s second argument: fewer registers, more rows in flight; small spills),
// chosen by timing 1, 4 and 6 on 6144 x 4096 bf16 rows (bench/RESULTS.md): 6 for the plain and
// modulated norms, 4 for the residual + norm (its shared memory allows 7 blocks anyway; 6 spilled
// and was slower) and the norm + RoPE kernels. 8 (32 registers) spilled and was slower, and
// 8 x 256 threads exceed an sm_89 SM.
inline constexpr int kRowNormMinBlocks = 6;
inline constexpr int kResidualNormMinBlocks = 4;
inline constexpr int kNormRopeMinBlocks = 4;

// Threads per row block: a warp for short rows, up to 256 (each thread then handles d / 256).
__host__ __device__ inline int row_threads(int64_t d) {
  int t = 32;
  while (t < kMaxRowThreads && t < d) t *= 2;
  return t;
}

__device__ __forceinline__ float inv_std(float sum_sq, int64_t n, double eps) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(sum_sq) / static_cast<double>(n) + eps));
}

// One term of a sum of squares. nvcc contracts `ss += v * v` into an FMA; spelled out so that
// every kernel rounds every term the same way.
__device__ __forceinline__ float add_square(float ss, float v) { return __fmaf_rn(v, v, ss); }

// dt's own storage rounding of v (what an op stores before the next op reloads it).
__device__ __forceinline__ float round_to(DType dt, float v) {
  return dt == DType::BF16 ? dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(v)) : v;
}

// The sum of squares of a row of d values as a block of `threads` threads forms it (thread t
// sums elements t, t + threads, ... with add_square, then block_sum), computed by one warp: lane
// l plays threads l, l + 32, ..., each warp's share goes through the same warp_sum, and the
// warps' sums through the same final warp_sum with zeros in the missing slots. Every lane gets
// the value. at(i): element i of the row.
template <typename At>
__device__ __forceinline__ float warp_row_sum_sq(At at, int d, int threads) {
  const int lane = threadIdx.x & 31, warps = threads >> 5;
  float mine = 0.f;
  for (int w = 0; w < warps; ++w) {
    float ss = 0.f;
    for (int i = lane + 32 * w; i < d; i += threads) ss = add_square(ss, at(i));
    ss = warp_sum(ss);
    if (lane == w) mine = ss;
  }
  return warp_sum(mine);
}

// Most bytes of a row the vector paths stage in shared memory (stage_row_inv_rms). Dynamic shared
// memory for the staged row; with the kernel's static reduction buffer it must stay under the
// 48 KiB a launch gets without opting in (a 48 KiB row failed to launch).
inline constexpr int64_t kRowVecMaxBytes = 32 * 1024;

// The sum of stage_row_inv_rms (below) over a row a kernel staged in `smem` itself (e.g. values it
// computed): every thread of the block calls it after its own stores to `smem`.
__device__ __forceinline__ float staged_row_inv_rms(DType dt, int d, double eps, const uint4* smem) {
  __syncthreads();
  float ss = 0.f;
  if (dt == DType::BF16) {
    const uint16_t* xs = reinterpret_cast<const uint16_t*>(smem);
#pragma unroll 4
    for (int i = threadIdx.x; i < d; i += blockDim.x)
      ss = add_square(ss, dtype_bits::bf16_to_f32(xs[i]));
  } else {
    const float* xs = reinterpret_cast<const float*>(smem);
#pragma unroll 4
    for (int i = threadIdx.x; i < d; i += blockDim.x) ss = add_square(ss, xs[i]);
  }
  return inv_std(block_sum(ss), d, eps);
}

// The vector paths' row statistics (rms_norm_vec_kernel, and the fused kernels that must agree
// with it): the row of d values at `row` (f32 or bf16, 16-byte aligned, d * element size a
// multiple of 16) is staged in `smem` with 16-byte loads, then summed in the general rms_norm
// kernel's order (thread t of the block sums elements t, t + blockDim.x, ... with add_square,
// then block_sum). Every thread of the block must call it; every thread gets 1 / RMS, and the
// staged row is visible to the whole block on return (block_sum synchronises). The caller
// synchronises again before the next row overwrites smem.
__device__ __forceinline__ float stage_row_inv_rms(const void* row, DType dt, int d, double eps,
                                                   uint4* smem) {
  const int vecs = d * (dt == DType::BF16 ? 2 : 4) / 16;
  const uint4* src = static_cast<const uint4*>(row);
  for (int j = threadIdx.x; j < vecs; j += blockDim.x) smem[j] = src[j];
  return staged_row_inv_rms(dt, d, eps, smem);
}

// The asynchronous form of stage_row_inv_rms's copy (cp.async, sm_80+), for kernels that stage
// the next row while they work on the current one: the block's threads copy the row's 16-byte
// vectors (thread t: t, t + blockDim, ...) into `smem` and commit them as one group. Before the
// staged row is read: mma::cp_async_wait (this thread's copies done), then a barrier
// (staged_row_inv_rms starts with one) for the other threads'.
// copy_row_async: the copies without the commit (several rows in one group).
__device__ __forceinline__ void copy_row_async(const void* row, DType dt, int d, uint4* smem) {
  const int vecs = d * (dt == DType::BF16 ? 2 : 4) / 16;
  const uint4* src = static_cast<const uint4*>(row);
  for (int j = threadIdx.x; j < vecs; j += blockDim.x)
    mma::cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(smem + j)), src + j, true);
}
__device__ __forceinline__ void stage_row_async(const void* row, DType dt, int d, uint4* smem) {
  copy_row_async(row, dt, d, smem);
  mma::cp_async_commit();
}

// The double-buffered row loop's step (rows r, r + gridDim, ... alternating between two staging
// buffers, the first staged before the loop): stage_next() puts the next row into the other
// buffer (which the barrier ending the previous row freed) as one group, or, after the last row,
// an empty group is committed; then this thread's copies of the current row are waited for. The
// caller's next barrier (staged_row_inv_rms starts with one) makes the other threads' visible.
template <typename StageNext>
__device__ __forceinline__ void stage_next_then_wait(bool has_next, StageNext&& stage_next) {
  if (has_next) {
    stage_next();
  } else {
    mma::cp_async_commit();
  }
  mma::cp_async_wait<1>();
}

// warp_sum of 32 values (one per thread l' of a warp), replayed by a group of 4 consecutive lanes
// holding 8 values each: lane q = lane % 4 of the group holds threads 8 q .. 8 q + 7 in v[0..7].
// warp_sum's butterfly pairs l' bits 4, 3, 2, 1, 0 in that order: bits 4 and 3 pair lanes (xor 2,
// xor 1), bits 2-0 registers. Each level adds the same two partial sums as the butterfly (float
// addition is commutative), split between the two lanes that hold them so that every level moves
// half the values: 4 + 2 + 1 + 1 + 1 shuffles. Every lane of the group gets the sum, bit for bit.
__device__ __forceinline__ float warp_sum_of_4x8(const float (&v)[8], int q) {
  const bool hi2 = (q & 2) != 0, hi1 = (q & 1) != 0;
  float l1[4], l2[2];
#pragma unroll
  for (int k = 0; k < 4; ++k) {  // bit 4: lanes q, q ^ 2; the low lane keeps k 0-3, the high 4-7
    const float other = __shfl_xor_sync(0xffffffffu, hi2 ? v[k] : v[k + 4], 2);
    l1[k] = (hi2 ? v[k + 4] : v[k]) + other;
  }
#pragma unroll
  for (int j = 0; j < 2; ++j) {  // bit 3: lanes q, q ^ 1
    const float other = __shfl_xor_sync(0xffffffffu, hi1 ? l1[j] : l1[j + 2], 1);
    l2[j] = (hi1 ? l1[j + 2] : l1[j]) + other;
  }
  float s = (hi2 ? l2[1] : l2[0]) + __shfl_xor_sync(0xffffffffu, hi2 ? l2[0] : l2[1], 2);  // bit 2
  s += __shfl_xor_sync(0xffffffffu, s, 1);  // bit 1
  return s + __shfl_xor_sync(0xffffffffu, s, 2);  // bit 0
}

}  // namespace ltx::cuda
