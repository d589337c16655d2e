#pragma once
// A byte buffer on one device. The owner keeps the memory alive: an aligned heap block, an mmap'd
// file region (zero-copy weights) or a block from a device allocator.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/device.h"

namespace ltx {

class Storage {
 public:
  Storage(void* data, size_t bytes, Device device, std::shared_ptr<void> owner)
      : data_(data), bytes_(bytes), device_(device), owner_(std::move(owner)) {}

  // Fresh, uninitialised memory on `device` (64-byte aligned on the CPU).
  static std::shared_ptr<Storage> allocate(size_t bytes, Device device);

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  size_t bytes_;
  Device device_;
  std::shared_ptr<void> owner_;
};

// Host-memory accounting of Storage::allocate (CPU blocks only; mmap'd weights, borrowed memory
// and device allocations are not counted). Used by tests and tools to measure peak tensor memory,
// e.g. that tiled VAE decoding peaks with the tile size, not the video length.
struct HostAllocationStats {
  int64_t live_bytes = 0;  // allocated and not yet freed
  int64_t peak_bytes = 0;  // the most live at once since the last reset_host_allocation_peak()
};
HostAllocationStats host_allocation_stats();
// Restarts peak tracking from the current live bytes.
void reset_host_allocation_peak();

// How many Storage::allocate calls have been made so far, per device type (process-wide, never
// reset). Every op returns a freshly allocated tensor on its inputs' device, so the change of
// these counts over a piece of work says where that work ran (`ltx generate` reports it per
// stage; tests check that a component ran on the GPU).
struct AllocationCounts {
  int64_t host = 0;
  int64_t cuda = 0;
};
AllocationCounts allocation_counts();

// Bytes the host can still give to new allocations: /proc/meminfo's MemAvailable, else the free
// pages (0 when neither is known). The budget of memory-aware choices made for the CPU (the
// diffusion decoder's automatic tiling in generate and bench).
int64_t host_available_bytes();

}  // namespace ltx
