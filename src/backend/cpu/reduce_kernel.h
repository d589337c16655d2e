#pragma once
// The shared CPU reduction loop: a contiguous f32 buffer viewed as [A, R, B] is reduced over R,
// giving A * B accumulators. Used by the reductions, softmax statistics and the norms.
//
// step(acc, value, r, o) folds element r of output o (o = a * B + b) into acc; merge(acc, later)
// folds a later partial result into an earlier one. Work is split into a fixed number of pieces
// that depends only on the sizes (never on the thread count), so results are reproducible.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/common/reduce_plan.h"
#include "core/parallel.h"

namespace ltx::cpu {

inline constexpr int64_t kReduceRowChunk = 1 << 14;  // elements of one row per task (B == 1)
inline constexpr int64_t kReduceColBlock = 256;      // columns per task (B > 1)
inline constexpr int64_t kReduceGrain = 1 << 15;     // elements per task at least

template <typename Acc, typename Step, typename Merge>
std::vector<Acc> reduce_3d(const float* x, Split3 s, Acc init, Step step, Merge merge) {
  const int64_t A = s.a, R = s.r, B = s.b;
  std::vector<Acc> out(static_cast<size_t>(A * B), init);
  if (A * B == 0 || R == 0) return out;
  if (B == 1) {
    // Rows: long rows are cut into chunks whose partial results merge in order.
    const int64_t nchunks = (R + kReduceRowChunk - 1) / kReduceRowChunk;
    std::vector<Acc> part;
    if (nchunks > 1) part.assign(static_cast<size_t>(A * nchunks), init);
    Acc* dst = nchunks > 1 ? part.data() : out.data();
    const int64_t per_task = std::min(R, kReduceRowChunk);
    parallel_for(0, A * nchunks, std::max<int64_t>(1, kReduceGrain / per_task),
                 [&](int64_t t0, int64_t t1) {
                   for (int64_t t = t0; t < t1; ++t) {
                     const int64_t a = t / nchunks, c = t % nchunks;
                     const int64_t r0 = c * kReduceRowChunk;
                     const int64_t r1 = std::min(R, r0 + kReduceRowChunk);
                     const float* row = x + a * R;
                     Acc acc = init;
                     for (int64_t r = r0; r < r1; ++r) step(acc, row[r], r, a);
                     dst[t] = acc;
                   }
                 });
    if (nchunks > 1) {
      for (int64_t a = 0; a < A; ++a) {
        Acc acc = part[a * nchunks];
        for (int64_t c = 1; c < nchunks; ++c) merge(acc, part[a * nchunks + c]);
        out[a] = acc;
      }
    }
    return out;
  }
  // Columns: each task owns a block of columns of one `a` and walks all R rows over it, so the
  // inner loop runs along contiguous memory.
  const int64_t nblocks = (B + kReduceColBlock - 1) / kReduceColBlock;
  const int64_t per_task = R * std::min(B, kReduceColBlock);
  parallel_for(0, A * nblocks, std::max<int64_t>(1, kReduceGrain / per_task),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t a = t / nblocks;
                   const int64_t b0 = (t % nblocks) * kReduceColBlock;
                   const int64_t b1 = std::min(B, b0 + kReduceColBlock);
                   Acc* acc = out.data() + a * B;
                   for (int64_t r = 0; r < R; ++r) {
                     const float* row = x + (a * R + r) * B;
                     for (int64_t b = b0; b < b1; ++b) step(acc[b], row[b], r, a * B + b);
                   }
                 }
               });
  return out;
}

inline void merge_sum(double& acc, const double& later) { acc += later; }

// Per-output sum over R, in double.
inline std::vector<double> sum_3d(const float* x, Split3 s) {
  return reduce_3d<double>(
      x, s, 0.0, [](double& acc, float v, int64_t, int64_t) { acc += v; }, merge_sum);
}

// Per-output mean over R (NaN when R == 0, like torch).
inline std::vector<double> mean_3d(const float* x, Split3 s) {
  std::vector<double> m = sum_3d(x, s);
  for (double& v : m) v /= static_cast<double>(s.r);
  return m;
}

// Per-output sum of x^2 over R.
inline std::vector<double> sum_sq_3d(const float* x, Split3 s) {
  return reduce_3d<double>(
      x, s, 0.0,
      [](double& acc, float v, int64_t, int64_t) { acc += static_cast<double>(v) * v; },
      merge_sum);
}

// sum_sq_3d's value for one contiguous row of r elements (B == 1): the same chunks, each summed
// in order from 0, merged in order; for the fused ops that must agree with it bit for bit.
inline double row_sum_sq(const float* x, int64_t r) {
  double total = 0.0;
  for (int64_t r0 = 0; r0 < r; r0 += kReduceRowChunk) {
    const int64_t r1 = std::min(r, r0 + kReduceRowChunk);
    double acc = 0.0;
    for (int64_t i = r0; i < r1; ++i) acc += static_cast<double>(x[i]) * x[i];
    if (r0 == 0) {
      total = acc;
    } else {
      merge_sum(total, acc);
    }
  }
  return total;
}

// Per-output sum of (x - mean[o])^2 over R: the second pass of a two-pass variance, which stays
// accurate when |mean| >> std (unlike E[x^2] - E[x]^2).
inline std::vector<double> sum_sq_dev_3d(const float* x, Split3 s, const std::vector<double>& mean) {
  const double* m = mean.data();
  return reduce_3d<double>(
      x, s, 0.0,
      [m](double& acc, float v, int64_t, int64_t o) {
        const double d = v - m[o];
        acc += d * d;
      },
      merge_sum);
}

}  // namespace ltx::cpu
