#pragma once
// What the pipelines and the benchmarks need from the device they run on, for the CPU and (when
// compiled in) CUDA alike: a clear early error when the device cannot be used, waiting for queued
// work, and allocation statistics (the CUDA caching allocator's; on the CPU the host-allocation
// accounting of core/storage.h, which counts heap tensors but not mmap'd files).
#include <cstdint>
#include <string>

#include "core/device.h"

namespace ltx::backend {

// Throws an ltx::Error naming `what` (a flag) when `d` cannot run here: CUDA not compiled into
// this build, no such GPU.
void check_device(Device d, const char* what = "--device");
// "NVIDIA H200 (139.8 GiB)", "CPU (16 threads)".
std::string device_description(Device d);
// Blocks until all work queued on `d` has finished (a no-op on the CPU, whose ops are synchronous).
void synchronize(Device d);
// Blocks until the work queued so far on the calling thread's current stream of `d` has finished,
// not the work of other streams (the decode's audio on its own stream runs on; a no-op on the CPU).
void synchronize_stream(Device d);
// Opens (start) or closes the CUDA profiler's capture range on `d` (cudaProfilerStart / Stop: what
// `ncu --profile-from-start off` and `nsys profile --capture-range=cudaProfilerApi` record); a
// no-op on the CPU.
void profiler_range(Device d, bool start);

struct MemoryStats {
  int64_t live_bytes = 0;      // allocated now
  int64_t peak_bytes = 0;      // most allocated at once since reset_peak_memory
  int64_t reserved_bytes = 0;  // CUDA: held from the driver now (cached included); CPU: = live
  int64_t peak_reserved_bytes = 0;
};
MemoryStats memory_stats(Device d);
// Restarts peak tracking from the current allocation.
void reset_peak_memory(Device d);
// Bytes still free for new allocations on `d`: CUDA: the driver's free memory on the device (what
// the reference's cuda_activation_budget_bytes returns in a fresh process), under a memory limit
// (set_memory_limit) at most the limit less the bytes allocated now; CPU: the host's
// available memory (core/storage.h host_available_bytes).
int64_t free_memory_bytes(Device d);
// The memory of device `d` in bytes: CUDA: the device's total; CPU: the host's available memory.
int64_t total_memory_bytes(Device d);
// Caps what the allocator of CUDA device `d` holds from the driver (0: no cap): a request that
// would pass it throws ltx::OutOfMemory (core/out_of_memory.h). Throws ltx::Error naming `flag`
// on the CPU, whose memory is not budgeted.
void set_memory_limit(Device d, int64_t bytes, const char* flag = "--max-gpu-memory");
// The cap set_memory_limit put on `d` (0: none; always 0 on the CPU).
int64_t memory_limit_bytes(Device d);
// Gives cached device memory back (CUDA empty_cache); a no-op on the CPU.
void release_cached_memory(Device d);

}  // namespace ltx::backend
