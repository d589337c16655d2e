#pragma once
// natten's window rule on the device, shared by the tensor-core and wgmma neighborhood-attention
// kernels (the op's contract: src/ops/neighborhood_attention.h).

namespace ltx::cuda {

// Start of the window of position i along an axis of length len with kernel k (k <= len): the
// window [s, s + k) is shifted inward at the borders.
__host__ __device__ __forceinline__ int window_start(int i, int len, int k) {
  const int s = i - k / 2;
  return s < 0 ? 0 : (s > len - k ? len - k : s);
}

// The union [lo, hi) of the windows of queries [q0, q0 + n) (clipped to the axis) and their
// intersection [in_lo, in_hi) (empty when in_lo >= in_hi). Window starts grow with the query.
struct AxisRange {
  int lo, hi, in_lo, in_hi;
};
__host__ __device__ __forceinline__ AxisRange axis_range(int q0, int n, int len, int k) {
  const int last = min(q0 + n, len) - 1;
  const int first = min(q0, len - 1);
  const int s_first = window_start(first, len, k), s_last = window_start(last, len, k);
  return {s_first, s_last + k, s_last, s_first + k};
}

}  // namespace ltx::cuda
