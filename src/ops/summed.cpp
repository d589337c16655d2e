#include "ops/summed.h"

#include <string>

#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace ltx::ops {

Shape Summed::check(const char* op, const char* arg) const {
  LTX_CHECK(a.defined(), op, ": ", arg, " is an undefined tensor");
  check_float(op, arg, a);
  LTX_CHECK(b.defined() || run_ends.empty(), op, ": ", arg, " has runs but no second summand");
  if (!b.defined()) return a.shape();
  check_float(op, (std::string(arg) + " (second summand)").c_str(), b);
  if (run_ends.empty()) return broadcast_shapes(a.shape(), b.shape(), op);
  LTX_CHECK(b.dim() >= 2 && b.size(-2) == static_cast<int64_t>(run_ends.size()), op, ": ", arg,
            "'s second summand ", b.describe(), " must have one row per run along dim -2 (",
            run_ends.size(), " runs)");
  int64_t prev = 0;
  for (const int64_t end : run_ends) {
    LTX_CHECK(end > prev, op, ": ", arg, "'s runs must be non-empty and in order, got an end of ",
              end, " after ", prev);
    prev = end;
  }
  Shape expanded = b.shape();
  expanded[expanded.size() - 2] = run_ends.back();
  return broadcast_shapes(a.shape(), expanded, op);
}

DType Summed::dtype() const { return b.defined() ? float_result_dtype({&a, &b}) : a.dtype(); }

Summed Summed::run(size_t r) const {
  LTX_CHECK(r < run_ends.size(), "Summed::run: run ", r, " of ", run_ends.size());
  const int64_t start = r == 0 ? 0 : run_ends[r - 1], total = run_ends.back();
  const bool a_rows = a.dim() >= 2 && a.size(-2) == total;  // else a broadcasts along dim -2
  return {a_rows ? a.narrow(a.dim() - 2, start, run_ends[r] - start) : a,
          b.narrow(b.dim() - 2, static_cast<int64_t>(r), 1)};
}

Tensor Summed::value() const {
  if (!b.defined()) return a;
  // With runs the sum is formed per run, then repeated over the runs' rows: the same elements as
  // add(a, expanded_b()), one [.., T, D] pass instead of two. A first summand with the sum's rows
  // (not broadcast along dim -2) needs the rows expanded first.
  if (run_ends.empty() || (a.dim() >= 2 && a.size(-2) > 1)) return add(a, expanded_b());
  return expand_runs(add(a, b), run_ends);
}

Tensor expand_runs(const Tensor& t, const std::vector<int64_t>& run_ends) {
  if (run_ends.empty()) return t;
  LTX_CHECK(t.dim() >= 2 && t.size(-2) == static_cast<int64_t>(run_ends.size()), "expand_runs: ",
            t.describe(), " must have one row per run along dim -2 (", run_ends.size(), " runs)");
  const int64_t row_dim = t.dim() - 2;
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (size_t r = 0; r < run_ends.size(); ++r) {
    LTX_CHECK(run_ends[r] > start, "expand_runs: runs must be non-empty and in order, got an end of ",
              run_ends[r], " after ", start);
    Shape s = t.shape();
    s[static_cast<size_t>(row_dim)] = run_ends[r] - start;
    parts.push_back(t.narrow(row_dim, static_cast<int64_t>(r), 1).expand(s));
    start = run_ends[r];
  }
  return parts.size() == 1 ? parts.front().contiguous() : concat(parts, row_dim);
}

}  // namespace ltx::ops
