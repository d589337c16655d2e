#pragma once
// The CUDA side of block streaming (backend/block_ring.h says what it is for): page-locked host
// memory for the blocks' parameters, device slots, and the copy stream that fills the slots while
// the current stream computes, ordered by events.
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "backend/common/block_schedule.h"
#include "backend/cuda/stream.h"

namespace ltx::cuda {

// `bytes` of page-locked host memory (cudaHostAlloc), freed when the last copy goes away: the
// device reads it by DMA, so host -> device copies from it are asynchronous.
std::shared_ptr<void> pinned_host_allocate(size_t bytes);

class BlockRing {
 public:
  // `host[i]` / `bytes[i]`: block i's page-locked host bytes; slots of the largest block's size
  // are allocated on `device` (the caching allocator, so they count as the model's memory).
  BlockRing(int device, std::vector<const void*> host, std::vector<size_t> bytes, int64_t slots);
  // Blocks written by `fill(block, staging)` into one of two page-locked staging buffers at each
  // load (--offload disk: read from the mapped file every pass); the host waits for a staging
  // buffer's previous copy before refilling it.
  using Fill = std::function<void(int64_t block, void* staging)>;
  BlockRing(int device, std::vector<size_t> bytes, int64_t slots, Fill fill);
  ~BlockRing();
  BlockRing(const BlockRing&) = delete;
  BlockRing& operator=(const BlockRing&) = delete;

  const backend::BlockSchedule& schedule() const { return schedule_; }
  void* slot_data(int64_t slot) const { return slots_[static_cast<size_t>(slot)].get(); }
  size_t slot_bytes() const { return slot_bytes_; }

  // A pass over the blocks on the calling thread's current stream: begin() forks the copy stream
  // from it and issues the first loads; before(i) makes the current stream wait for block i's
  // load; after(i), called once block i's compute is issued, lets the copy stream refill the slot
  // after that compute; end() joins the copy stream back. Everything is event-ordered on the
  // device: the host never waits.
  void begin();
  void before(int64_t block);
  void after(int64_t block);
  void end();

 private:
  void load(int64_t block);

  int device_;
  std::vector<const void*> host_;
  std::vector<size_t> bytes_;
  backend::BlockSchedule schedule_;
  size_t slot_bytes_ = 0;
  std::vector<std::shared_ptr<void>> slots_;
  OwnedStream copy_stream_;
  Stream compute_;
  Event start_, finished_;
  std::vector<Event> loaded_, released_;  // per slot: its load done, its compute done
  std::vector<bool> released_in_pass_;     // per slot: released_ recorded in the current pass
  Fill fill_;                              // set: blocks go through the staging buffers
  std::vector<std::shared_ptr<void>> staging_;
  std::vector<Event> staged_;              // per staging buffer: its last copy to a slot
  size_t next_staging_ = 0;
};

}  // namespace ltx::cuda
