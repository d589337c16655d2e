#pragma once
// A process-wide CPU thread pool. parallel_for splits [begin, end) into chunks of at least
// `grain` items and runs fn(chunk_begin, chunk_end) on the pool; calls from inside a pool task
// run inline (no nested parallelism). The thread count is LTX_NUM_THREADS or the core count.
#include <cstdint>
#include <functional>

namespace ltx {

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& fn);
int num_threads();
// True on a thread that is running a parallel_for chunk (where a nested parallel_for runs inline).
// Code that may wait for a resource held by a thread outside the pool checks it: that thread may
// itself be waiting for the pool.
bool inside_parallel_for();
// Resizes the pool (>= 1); takes effect for the next parallel_for.
void set_num_threads(int n);

}  // namespace ltx
