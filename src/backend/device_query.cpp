#include "backend/device_query.h"

#include <algorithm>
#include <cstdio>

#include "core/device_hooks.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/storage.h"
#if LTX_WITH_CUDA
#include <cuda_profiler_api.h>

#include "backend/cuda/allocator.h"
#include "backend/cuda/device.h"
#include "backend/cuda/stream.h"
#endif

namespace ltx::backend {

void check_device(Device d, const char* what) {
  if (d.is_cpu()) return;
  LTX_CHECK(detail::cuda_compiled(), what, " ", d.str(),
            ": this ltx build has no CUDA backend (configured with LTX_CUDA=OFF or without nvcc); "
            "use --device cpu or rebuild with the CUDA toolkit (-DLTX_CUDA=ON)");
#if LTX_WITH_CUDA
  cuda::check_device(d.index, what);
#endif
}

std::string device_description(Device d) {
  if (d.is_cpu()) return str("CPU (", num_threads(), " threads)");
#if LTX_WITH_CUDA
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f GiB",
                static_cast<double>(cuda::memory_info(d.index).total_bytes) / (1024.0 * 1024.0 * 1024.0));
  return str(cuda::device_name(d.index), " (", gib, ")");
#else
  return d.str();
#endif
}

void synchronize(Device d) {
#if LTX_WITH_CUDA
  if (d.is_cuda()) cuda::synchronize(d.index);
#else
  (void)d;
#endif
}

void synchronize_stream(Device d) {
#if LTX_WITH_CUDA
  if (d.is_cuda()) cuda::current_stream(d.index).synchronize();
#else
  (void)d;
#endif
}

void profiler_range(Device d, bool start) {
#if LTX_WITH_CUDA
  if (!d.is_cuda()) return;
  cuda::DeviceGuard guard(d.index);
  // A failure only means no profiler is attached to record the range: nothing to report.
  (void)(start ? cudaProfilerStart() : cudaProfilerStop());
#else
  (void)d;
  (void)start;
#endif
}

MemoryStats memory_stats(Device d) {
  MemoryStats m;
  if (d.is_cpu()) {
    const HostAllocationStats h = host_allocation_stats();
    m.live_bytes = m.reserved_bytes = h.live_bytes;
    m.peak_bytes = m.peak_reserved_bytes = h.peak_bytes;
    return m;
  }
#if LTX_WITH_CUDA
  const cuda::AllocatorStats s = cuda::allocator_stats(d.index);
  m.live_bytes = static_cast<int64_t>(s.allocated_bytes);
  m.peak_bytes = static_cast<int64_t>(s.peak_allocated_bytes);
  m.reserved_bytes = static_cast<int64_t>(s.reserved_bytes);
  m.peak_reserved_bytes = static_cast<int64_t>(s.peak_reserved_bytes);
#endif
  return m;
}

void reset_peak_memory(Device d) {
  if (d.is_cpu()) {
    reset_host_allocation_peak();
    return;
  }
#if LTX_WITH_CUDA
  cuda::reset_peak_stats(d.index);
#endif
}

int64_t free_memory_bytes(Device d) {
  if (d.is_cpu()) return host_available_bytes();
  check_device(d);
#if LTX_WITH_CUDA
  const auto driver_free = static_cast<int64_t>(cuda::memory_info(d.index).free_bytes);
  const cuda::AllocatorStats s = cuda::allocator_stats(d.index);
  if (s.limit_bytes == 0) return driver_free;
  // Under a budget what the allocator may still hand out: its cached blocks can be given back.
  const int64_t under_limit = s.limit_bytes > s.allocated_bytes
                                  ? static_cast<int64_t>(s.limit_bytes - s.allocated_bytes)
                                  : 0;
  return std::min(driver_free, under_limit);
#else
  return 0;  // not reached: check_device throws without the CUDA backend
#endif
}

int64_t total_memory_bytes(Device d) {
  if (d.is_cpu()) return host_available_bytes();
  check_device(d);
  return static_cast<int64_t>(detail::cuda_total_memory(d.index));
}

int64_t memory_limit_bytes(Device d) {
  if (d.is_cpu()) return 0;
  check_device(d);
#if LTX_WITH_CUDA
  return static_cast<int64_t>(cuda::memory_limit(d.index));
#else
  return 0;  // not reached: check_device throws without the CUDA backend
#endif
}

void set_memory_limit(Device d, int64_t bytes, const char* flag) {
  LTX_CHECK(!d.is_cpu(), flag, " budgets GPU memory; it does not apply to --device cpu (drop it)");
  LTX_CHECK(bytes >= 0, flag, ": the budget must be >= 0 bytes (0: none), got ", bytes);
  check_device(d, flag);
  detail::cuda_set_memory_limit(d.index, static_cast<size_t>(bytes));
}

void release_cached_memory(Device d) {
#if LTX_WITH_CUDA
  if (d.is_cuda()) cuda::empty_cache(d.index);
#else
  (void)d;
#endif
}

}  // namespace ltx::backend
