#pragma once
// Per-op GPU time profile for performance work, an op observer (core/op_observer.h) that `ltx`
// installs when LTX_PROFILE_OPS is set. LTX_PROFILE_OPS=1: every op that dispatches to CUDA
// (LTX_CUDA_DISPATCH) synchronises the GPU before and after it and adds the wall time to its op
// name; at exit a table (total ms, calls, share) goes to stderr. Only the outermost op of a nested
// call is counted (a fused op calling another op counts once). Copies and work outside ops are
// reported as the remainder of the profiled span. The synchronisation makes profiled runs slower,
// so use it to find where time goes, not for benchmarks. LTX_PROFILE_OPS=events records CUDA
// events around each op instead (no synchronisation): op times from the GPU timeline plus the time
// between ops, with the largest gaps and the ops around them.
#include "core/env_settings.h"

namespace ltx::profiling {

// Installs the process's op profiler in `mode` (Off: nothing). Call once, before ops run; the
// profiler lives until the process ends and prints its table at exit once it recorded an op.
void install_op_profiler(env::OpProfiling mode);

// Forgets everything recorded so far (synchronising first), e.g. after a benchmark's warm-up so
// the table covers the timed calls only. Does nothing without an installed profiler.
void reset_op_profile();

}  // namespace ltx::profiling
