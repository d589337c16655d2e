#pragma once
// Warp- and block-wide sums and maxima for the row kernels (norms, reductions, softmax).
// Block versions must be called by every thread of the block (they synchronise); blockDim.x is a
// multiple of 32 and at most 1024.
#include <cstdint>

#include "backend/common/scalar_math.h"

namespace ltx::cuda {

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// NaN-propagating, like the CPU's reductions.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = scalar::max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = scalar::min_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

struct SumOp {
  template <typename T>
  __device__ T warp(T v) const { return warp_sum(v); }
  template <typename T>
  __device__ T merge(T a, T b) const { return a + b; }
};
struct MaxOp {
  __device__ float warp(float v) const { return warp_max(v); }
  __device__ float merge(float a, float b) const { return scalar::max_nan(a, b); }
};
struct MinOp {
  __device__ float warp(float v) const { return warp_min(v); }
  __device__ float merge(float a, float b) const { return scalar::min_nan(a, b); }
};

// Reduces v over the block with `op`; every thread gets the result. `identity` fills the slots
// of missing warps.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T part[32];
  __shared__ T total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = op.warp(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T s = lane < warps ? part[lane] : identity;
    s = op.warp(s);
    if (lane == 0) total = s;
  }
  __syncthreads();
  const T r = total;
  __syncthreads();  // part/total may be reused by the next call
  return r;
}

template <typename T>
__device__ __forceinline__ T block_sum(T v) {
  return block_reduce<T>(v, SumOp{}, T(0));
}

}  // namespace ltx::cuda
