#include "op_types/summed.h"

#include <string>

#include "op_types/checks.h"

namespace ltx::ops {

namespace {
// t (named by `what` in the errors) holds one row per run along dim -2, and the runs' ends
// increase from 0.
void check_runs(const char* what, const Tensor& t, const std::vector<int64_t>& run_ends) {
  LTX_CHECK(t.dim() >= 2 && t.size(-2) == static_cast<int64_t>(run_ends.size()), what, " ",
            t.describe(), " must have one row per run along dim -2 (", run_ends.size(), " runs)");
  int64_t prev = 0;
  for (const int64_t end : run_ends) {
    LTX_CHECK(end > prev, what, ": the runs must be non-empty and in order, got an end of ", end,
              " after ", prev);
    prev = end;
  }
}
}  // namespace

Shape Summed::check(const char* op, const char* arg) const {
  LTX_CHECK(a.defined(), op, ": ", arg, " is an undefined tensor");
  check_float(op, arg, a);
  LTX_CHECK(b.defined() || run_ends.empty(), op, ": ", arg, " has runs but no second summand");
  if (!b.defined()) return a.shape();
  check_float(op, (std::string(arg) + " (second summand)").c_str(), b);
  if (run_ends.empty()) return broadcast_shapes(a.shape(), b.shape(), op);
  check_runs((std::string(op) + ": " + arg + "'s second summand").c_str(), b, run_ends);
  Shape expanded = b.shape();
  expanded[expanded.size() - 2] = run_ends.back();
  return broadcast_shapes(a.shape(), expanded, op);
}

DType Summed::dtype() const { return b.defined() ? float_result_dtype({&a, &b}) : a.dtype(); }

Summed Summed::run(size_t r) const {
  LTX_CHECK(r < run_ends.size(), "Summed::run: run ", r, " of ", run_ends.size());
  return {run_rows(a, run_ends, r), b.narrow(b.dim() - 2, static_cast<int64_t>(r), 1)};
}

Tensor expand_runs(const Tensor& t, const std::vector<int64_t>& run_ends) {
  if (run_ends.empty()) return t;
  check_runs("expand_runs:", t, run_ends);
  const int64_t row_dim = t.dim() - 2;
  if (run_ends.size() == 1) {
    Shape s = t.shape();
    s[static_cast<size_t>(row_dim)] = run_ends[0];
    return t.expand(s).contiguous();
  }
  // Each run's row broadcast into its rows of the result (ops::concat's copies, without the
  // dispatch layer: views and core copies only).
  Shape shape = t.shape();
  shape[static_cast<size_t>(row_dim)] = run_ends.back();
  Tensor out = Tensor::empty(shape, t.dtype(), t.device());
  int64_t start = 0;
  for (size_t r = 0; r < run_ends.size(); ++r) {
    Shape s = t.shape();
    s[static_cast<size_t>(row_dim)] = run_ends[r] - start;
    out.narrow(row_dim, start, run_ends[r] - start)
        .copy_from(t.narrow(row_dim, static_cast<int64_t>(r), 1).expand(s));
    start = run_ends[r];
  }
  return out;
}

Tensor run_rows(const Tensor& t, const std::vector<int64_t>& run_ends, size_t r) {
  if (!t.defined() || t.dim() < 2 || t.size(-2) != run_ends.back()) return t;
  const int64_t start = r == 0 ? 0 : run_ends[r - 1];
  return t.narrow(t.dim() - 2, start, run_ends[r] - start);
}

}  // namespace ltx::ops
