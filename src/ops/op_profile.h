#pragma once
#include <string>

// Per-op GPU time profile for performance work: with LTX_PROFILE_OPS=1 in the environment, every
// op that dispatches to CUDA (LTX_CUDA_DISPATCH) synchronises the GPU before and after it and adds
// the wall time to its op name; at exit a table (total ms, calls, share) goes to stderr. Only the
// outermost op of a nested call is counted (a fused op calling another op counts once). Copies
// and work outside ops are reported as the remainder of the profiled span. Off (one branch on a
// cached flag) otherwise; the synchronisation makes profiled runs slower, so use it to find where
// time goes, not for benchmarks. LTX_PROFILE_OPS=events records CUDA events around each op
// instead (no synchronisation): op times from the GPU timeline plus the time between ops, with
// the largest gaps and the ops around them.
namespace ltx::ops {

bool op_profiling_enabled();

// Forgets everything recorded so far (synchronising first), e.g. after a benchmark's warm-up so
// the table covers the timed calls only.
void op_profile_reset();

// Appends a detail (e.g. a GEMM's sizes) to the name the current outermost op is counted under,
// so one op's calls split by shape. Call only when op_profiling_enabled().
void op_profile_detail(const std::string& detail);

class OpProfileScope {
 public:
  explicit OpProfileScope(const char* op);
  ~OpProfileScope();
  OpProfileScope(const OpProfileScope&) = delete;
  OpProfileScope& operator=(const OpProfileScope&) = delete;

 private:
  const char* op_ = nullptr;  // null: not recording (profiling off or nested)
  std::string detail_;        // op_profile_detail's text, if any
  double start_ = 0.0;
  void* start_event_ = nullptr;  // events mode: cudaEvent_t
  void* end_event_ = nullptr;
};

}  // namespace ltx::ops
