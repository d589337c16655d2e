#pragma once
// ops::Summed: an operand given as the sum of two tensors, a + b, which the consuming op forms per
// element instead of reading a tensor that a separate ops::add materialised. The transformer's
// AdaLN values are such sums (a table row [D] plus the per-token timestep slice [B, T, D]); at
// 6144 x 4096 each materialised sum is 50 MB written and read back.
//
// Exactness: a consumer computes add(a, b) with ops::add's arithmetic and rounds it to add's result
// dtype (bf16 when both parts are bf16 on CUDA, else f32) before using it, so that op(..., Summed{a,
// b}, ...) equals op(..., add(a, b), ...) bit for bit. A Tensor converts implicitly (b undefined:
// the operand is a itself), so the ops that take a Summed keep their Tensor call sites.
//
// Runs: b may hold one row per run of equal rows along the sum's dim -2 (run_ends, e.g. the
// AdaLN values of an image-conditioned latent: the pinned frame's tokens, then the rest). Run r
// covers the sum's rows [run_ends[r - 1], run_ends[r]) of that dim (from 0), so b's dim -2 has
// run_ends.size() rows and the sum's has run_ends.back(). The sum is the same as with b's rows
// repeated over their runs (expand_runs); the CUDA consumers read b's rows through the run map
// instead of reading a per-token tensor.
//
// This header is the part the backends share with the dispatch layer (views and copies only);
// the materialised sum through ops::add is ops::materialize (ops/summed.h).
#include <vector>

#include "core/tensor.h"

namespace ltx::ops {

// The most runs a Summed should carry: the CUDA consumers read at most this many through their
// run map (more are materialised per token first); producers expand longer lists themselves.
constexpr size_t kMaxSummedRuns = 8;

// t's rows along dim -2 (one per run) repeated over their runs (Summed::run_ends), as a new
// contiguous tensor; t itself when run_ends is empty.
Tensor expand_runs(const Tensor& t, const std::vector<int64_t>& run_ends);

// Run r's rows [run_ends[r - 1], run_ends[r]) of t along dim -2 when t has all the runs' rows
// there (run_ends.back() of them); else t itself (undefined, or broadcast along dim -2). The
// operands of an op applied run by run.
Tensor run_rows(const Tensor& t, const std::vector<int64_t>& run_ends, size_t r);

struct Summed {
  Tensor a, b;                    // b undefined: the operand is a
  std::vector<int64_t> run_ends;  // empty: b as it is; else b's rows along dim -2 per run

  Summed() = default;
  Summed(const Tensor& t) : a(t) {}  // NOLINT(google-explicit-constructor): a plain operand
  Summed(const Tensor& first, const Tensor& second) : a(first), b(second) {}
  Summed(const Tensor& first, const Tensor& second, std::vector<int64_t> ends)
      : a(first), b(second), run_ends(std::move(ends)) {}

  bool summed() const { return b.defined(); }
  bool has_runs() const { return !run_ends.empty(); }
  // Checks the parts for `op`'s argument `arg` (a defined, both float storage, shapes that
  // broadcast, runs that cover b's rows) and returns the sum's shape. The caller checks the
  // devices (common_device over a and b with its other operands).
  Shape check(const char* op, const char* arg) const;
  // The dtype ops::add(a, b) would return (a's dtype when not summed).
  DType dtype() const;
  // The operand on run r's rows: run_rows(a, ...) plus b's row r, which broadcasts over the run.
  // Needs runs.
  Summed run(size_t r) const;
};

// The materialised operand with `add` as the addition (a function of two tensors with
// ops::add's arithmetic: ops::add itself above the backends, a backend's own add inside one):
// add(a, expand_runs(b, run_ends)) (with runs formed per run, then expanded: the same values),
// or a. The unfused reference, and the CPU path.
template <typename Add>
Tensor materialize_with(const Summed& s, Add&& add) {
  if (!s.b.defined()) return s.a;
  // With runs the sum is formed per run, then repeated over the runs' rows: the same elements as
  // add(a, expand_runs(b)), one [.., T, D] pass instead of two. A first summand with the sum's
  // rows (not broadcast along dim -2) needs the rows expanded first.
  if (s.run_ends.empty() || (s.a.dim() >= 2 && s.a.size(-2) > 1))
    return add(s.a, expand_runs(s.b, s.run_ends));
  return expand_runs(add(s.a, s.b), s.run_ends);
}

}  // namespace ltx::ops
