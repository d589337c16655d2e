#pragma once
// The order of a block-streaming pass (backend/block_ring.h), as plain arithmetic so it can be
// tested without a GPU. A model's `blocks` repeated layers live on the host; `slots` device
// buffers hold the ones in flight. Block i always goes to slot i % slots, so a block's device
// view is fixed for the model's life. A pass first loads blocks 0 .. slots-1, then after the
// compute of block i has been issued, block i + slots is loaded into the slot block i used (the
// copy waits for that compute, the compute of block i + slots waits for the copy).
#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.h"

namespace ltx::backend {

class BlockSchedule {
 public:
  BlockSchedule(int64_t blocks, int64_t slots) : blocks_(blocks), slots_(slots) {
    LTX_CHECK(blocks >= 1, "block streaming: a model with ", blocks, " blocks has nothing to stream");
    LTX_CHECK(slots >= 2, "block streaming: ", slots,
              " device slots; at least 2 are needed so a copy can run beside a compute");
  }

  int64_t blocks() const { return blocks_; }
  // Slots a pass uses: never more than there are blocks.
  int64_t slots() const { return slots_ < blocks_ ? slots_ : blocks_; }
  int64_t slot_of(int64_t block) const {
    LTX_CHECK(block >= 0 && block < blocks_, "block streaming: block ", block, " of ", blocks_);
    return block % slots_;
  }
  // The blocks loaded before the first compute of a pass.
  std::vector<int64_t> initial_loads() const {
    std::vector<int64_t> out;
    for (int64_t b = 0; b < slots(); ++b) out.push_back(b);
    return out;
  }
  // The block to load once the compute of `block` has been issued (into slot_of(block)), if any.
  std::optional<int64_t> load_after(int64_t block) const {
    slot_of(block);
    const int64_t next = block + slots_;
    if (next >= blocks_) return std::nullopt;
    return next;
  }

 private:
  int64_t blocks_, slots_;
};

}  // namespace ltx::backend
