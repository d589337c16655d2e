#pragma once
// The online softmax of the flash-style attention kernels (attention_mma.cu, attention_wgmma.cu,
// neighborhood_attention_mma.cu, neighborhood_attention_wgmma.cu), one definition so that they all
// round alike. The rows live in the MMA accumulator layout (mma.sync's, repeated by wgmma): a query
// row's columns are spread over the 4 lanes of a quad, two consecutive columns a pair per lane.
// Each lane keeps the row's running max (the quad's, the same in all 4 lanes) and the running sum
// of its own columns' probabilities; quad_sum adds the 4 lanes' sums at the end.
#include <cmath>

#include "backend/cuda/mma_primitives.cuh"

namespace ltx::cuda::mma {

// The sum of v over the 4 lanes of this lane's quad (lanes l ^ 1, then l ^ 2), in every lane.
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// One key tile's step for one query row. `pairs(f)` calls f(x0, x1) on each of this lane's column
// pairs of the row (float references to the scaled logits, in the caller's order); on return they
// hold the probabilities exp2((x - m) * sl), m the new running max, and m_run / l_run are updated.
// Returns the factor that moves the row's accumulator (and l_run's old part) to the new max.
//   kSubtractFirst: (x - m) * sl, so that a row of -FLT_MAX biases is uniform, not inf - inf (the
//     masked kernels, whose logits already carry the scale: sl = log2(e)); else fmaf(x, sl, -m sl).
//   keep (fmaf form only): false drops the whole tile from this row: the running max stays and every
//     probability is exp2(x * 0 - inf) = 0 (the neighborhood kernel's planes outside a row's window).
// A row with every logit so far -inf keeps m_run = -inf and gets p = 0 (m taken as 0).
template <bool kSubtractFirst, typename Pairs>
__device__ __forceinline__ float online_softmax_row(float& m_run, float& l_run, float sl, bool keep,
                                                    Pairs&& pairs) {
  float mx = -INFINITY;
  pairs([&](float& x0, float& x1) { mx = fmaxf(mx, fmaxf(x0, x1)); });
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float m_new = keep ? fmaxf(m_run, mx) : m_run;
  const float m_use = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: p = 0
  const float corr = fast_exp2((m_run - m_use) * sl);
  float sum = 0.f;
  if constexpr (kSubtractFirst) {
    pairs([&](float& x0, float& x1) {
      x0 = fast_exp2((x0 - m_use) * sl);
      sum += x0;
      x1 = fast_exp2((x1 - m_use) * sl);
      sum += x1;
    });
  } else {
    const float sl_use = keep ? sl : 0.f;
    const float m_scaled = keep ? m_use * sl : INFINITY;
    pairs([&](float& x0, float& x1) {
      x0 = fast_exp2(fmaf(x0, sl_use, -m_scaled));
      sum += x0;
      x1 = fast_exp2(fmaf(x1, sl_use, -m_scaled));
      sum += x1;
    });
  }
  l_run = l_run * corr + sum;  // this lane's columns; quad_sum adds the quad's at the end
  m_run = m_new;
  return corr;
}

// online_softmax_row for both rows of a thread's wgmma accumulator tile s (m64nN: row r holds
// elements 4 n + 2 r and 4 n + 2 r + 1 of each 8-column block n); corr[r]: row r's factor.
template <bool kSubtractFirst, int kS>
__device__ __forceinline__ void online_softmax_tile(float (&s)[kS], float (&m_run)[2],
                                                    float (&l_run)[2], float sl, bool keep,
                                                    float (&corr)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    corr[r] = online_softmax_row<kSubtractFirst>(m_run[r], l_run[r], sl, keep, [&](auto&& f) {
#pragma unroll
      for (int n = 0; n < kS / 4; ++n) f(s[4 * n + 2 * r], s[4 * n + 2 * r + 1]);
    });
  }
}

}  // namespace ltx::cuda::mma
