#include "core/storage.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <new>
#include <sstream>
#include <string>

#include <unistd.h>

#include "core/device_hooks.h"
#include "core/error.h"

namespace ltx {

namespace {
std::atomic<int64_t> g_host_live{0};
std::atomic<int64_t> g_host_peak{0};
std::atomic<int64_t> g_host_allocations{0};
std::atomic<int64_t> g_cuda_allocations{0};

void host_allocated(int64_t bytes) {
  const int64_t live = g_host_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = g_host_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_host_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}
}  // namespace

HostAllocationStats host_allocation_stats() {
  return {g_host_live.load(std::memory_order_relaxed), g_host_peak.load(std::memory_order_relaxed)};
}

AllocationCounts allocation_counts() {
  return {g_host_allocations.load(std::memory_order_relaxed),
          g_cuda_allocations.load(std::memory_order_relaxed)};
}

void reset_host_allocation_peak() {
  g_host_peak.store(g_host_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

int64_t host_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream in(line.substr(13));
    int64_t kib = 0;
    if (in >> kib) return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  if (device.is_cuda()) {
    g_cuda_allocations.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<void> block = detail::cuda_allocate(bytes, device.index);
    void* p = block.get();
    return std::make_shared<Storage>(p, bytes, device, std::move(block));
  }
  constexpr size_t kAlign = 64;
  const size_t rounded = ((bytes + kAlign - 1) / kAlign) * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr)
    fail("out of host memory: could not allocate ", bytes,
         " bytes (reduce the resolution, frame count or tile size, or free memory)");
  const auto counted = static_cast<int64_t>(rounded);
  host_allocated(counted);
  g_host_allocations.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<void> owner(p, [counted](void* q) {
    g_host_live.fetch_sub(counted, std::memory_order_relaxed);
    std::free(q);
  });
  return std::make_shared<Storage>(p, bytes, device, std::move(owner));
}

}  // namespace ltx
