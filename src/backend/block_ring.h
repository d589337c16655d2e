#pragma once
// Block streaming for the layers above the backends: a model's repeated blocks keep their
// parameters in page-locked host memory and a ring of device slots holds the few in flight,
// filled on a copy stream while the current stream computes (cuda/block_ring.h). Only a GPU has
// anything to stream to: on the CPU every call throws, naming --offload.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/common/block_schedule.h"
#include "core/device.h"

namespace ltx::backend {

// Host memory that `device`'s copy engine reads asynchronously (page-locked).
std::shared_ptr<void> streaming_host_allocate(size_t bytes, Device device);

class BlockRing {
 public:
  // `host[i]` (`bytes[i]` long, from streaming_host_allocate) holds block i; `slots` device
  // buffers of the largest block's size are allocated on `device`.
  BlockRing(Device device, std::vector<const void*> host, std::vector<size_t> bytes, int64_t slots);
  // Block i (`bytes[i]` long) written by `fill(i, staging)` into a page-locked staging buffer at
  // each load (`--offload disk`: read again from the mapped file every pass).
  using Fill = std::function<void(int64_t block, void* staging)>;
  BlockRing(Device device, std::vector<size_t> bytes, int64_t slots, Fill fill);
  ~BlockRing();
  BlockRing(const BlockRing&) = delete;
  BlockRing& operator=(const BlockRing&) = delete;

  const BlockSchedule& schedule() const;
  // Slot `slot`'s device memory; kept alive by the returned owner.
  std::shared_ptr<void> slot(int64_t slot) const;
  // Device bytes the slots take.
  int64_t device_bytes() const;

  // One pass over the blocks in order, on the calling thread's current stream (cuda/block_ring.h).
  void begin();
  void before(int64_t block);
  void after(int64_t block);
  void end();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ltx::backend
