#pragma once
// Block streaming of a model's repeated layers (`--offload cpu`; the reference's
// block_streaming/): the blocks' parameters live in page-locked host memory, one packed buffer per
// block, and a ring of device slots (backend/block_ring.h) holds the blocks in flight: block i+1
// (and further with more slots) is copied on a copy stream while block i computes. Everything
// outside the blocks stays resident on the device.
//
// A block is a plain struct of Tensors. Each block is kept twice: its host copy (tensors in the
// packed page-locked buffer: what LoRA fusion writes, see host_home) and its device view (the same
// struct, every tensor pointing at the same offset in the block's slot). Block i always uses slot
// i % slots, so the device views are made once. The kernels and their order are those of the
// resident model, so a streamed forward gives the resident forward's bits.
//
//   StreamedBlocks<Block> s(device, visit);
//   for (each block) s.add(std::move(block_bound_on_the_host));
//   s.start(slots);
//   s.begin();
//   for (i ...) { const Block& b = s.acquire(i); b.forward(...); s.release(i); }
//   s.end();
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "backend/block_ring.h"
#include "core/tensor.h"
#include "nn/linear.h"

namespace ltx::models {

// How a model's repeated blocks are held: slots 0 keeps them resident on the device (no
// streaming); otherwise the first `resident` blocks stay on the device (partial residency: the
// memory planner's choice under a budget, generate/offload_plan.h) and the rest stream through
// `slots` (>= 2) device slots, from page-locked copies made at load (`--offload cpu`) or, with
// `from_file`, from where they were bound (views of the mapped file; LoRA-fused weights from the
// fuser's host buffers) through two page-locked staging buffers at every pass (`--offload disk`).
// resident >= the model's block count streams nothing.
struct BlockStreaming {
  int64_t slots = 0;
  bool from_file = false;
  int64_t resident = 0;
  bool enabled() const { return slots > 0; }
  // Whether block `i` (of a model with these settings) is streamed rather than resident.
  bool streams(int64_t i) const { return enabled() && i >= resident; }
};

// Calls `fn` on every tensor of one block, in a fixed order (a model's own visitor).
using TensorVisitFn = std::function<void(Tensor&)>;

// Every tensor an nn::Linear holds: the one place the block visitors learn it.
void visit_linear(nn::Linear& linear, const TensorVisitFn& fn);

namespace detail {

// The host side of one streamed block: its tensors packed into one page-locked buffer (null when
// they stay where they were bound).
struct PackedBlock {
  std::shared_ptr<void> host;  // page-locked
  size_t bytes = 0;
};

// The bytes a block takes in its slot (every defined tensor, in visiting order, each aligned).
size_t block_bytes(const std::function<void(const TensorVisitFn&)>& visit);
// Copies every tensor `visit` reaches to its place in `dst` (a slot's layout, on the host).
void fill_block(const std::function<void(const TensorVisitFn&)>& visit, void* dst);

// Copies every (defined) tensor `visit` reaches into one page-locked buffer for `device` and makes
// each tensor a contiguous view of it; records old data address -> new view in `moved`.
PackedBlock pack_block(const std::function<void(const TensorVisitFn&)>& visit, Device device,
                       std::map<const void*, Tensor>& moved);
// Logs (warning) that ending a pass failed; a destructor cannot throw it.
void log_pass_end_failure(const std::exception& e);
// Points every tensor `visit` reaches (a copy of a block) at its place in `slot`.
void view_in_slot(const std::function<void(const TensorVisitFn&)>& visit,
                  const std::shared_ptr<void>& slot, Device device);

}  // namespace detail

template <class Block>
class StreamedBlocks {
 public:
  using Visitor = std::function<void(Block&, const TensorVisitFn&)>;

  // Blocks are added one at a time as they are bound (so only one unpacked block is alive at a
  // time), then start() makes the ring of `slots` on `device`.
  StreamedBlocks(Device device, Visitor visit, bool from_file = false)
      : device_(device), visit_(std::move(visit)), from_file_(from_file) {}

  // `block`: bound on the host in the compute dtype (CPU tensors, possibly views of a file); its
  // parameters are copied into one page-locked buffer, or left there with `from_file`.
  void add(Block block) {
    host_.push_back(std::move(block));
    Block& b = host_.back();
    const auto visit = [&](const TensorVisitFn& f) { visit_(b, f); };
    if (from_file_)
      packed_.push_back({nullptr, detail::block_bytes(visit)});
    else
      packed_.push_back(detail::pack_block(visit, device_, moved_));
  }

  void start(int64_t slots) {
    std::vector<const void*> data;
    std::vector<size_t> bytes;
    for (const auto& p : packed_) {
      data.push_back(p.host.get());
      bytes.push_back(p.bytes);
    }
    if (from_file_)
      ring_ = std::make_unique<backend::BlockRing>(
          device_, std::move(bytes), slots, [this](int64_t i, void* staging) {
            detail::fill_block(
                [&](const TensorVisitFn& f) { visit_(host_[static_cast<size_t>(i)], f); }, staging);
          });
    else
      ring_ = std::make_unique<backend::BlockRing>(device_, std::move(data), std::move(bytes), slots);
    device_blocks_ = host_;
    for (size_t i = 0; i < device_blocks_.size(); ++i)
      detail::view_in_slot([&](const TensorVisitFn& f) { visit_(device_blocks_[i], f); },
                           ring_->slot(ring_->schedule().slot_of(static_cast<int64_t>(i))),
                           device_);
  }

  int64_t size() const { return static_cast<int64_t>(host_.size()); }
  int64_t slots() const { return ring_->schedule().slots(); }
  // Device bytes of the slots; host bytes of the blocks.
  int64_t device_bytes() const { return ring_->device_bytes(); }
  int64_t host_bytes() const {
    int64_t n = 0;
    for (const auto& p : packed_) n += static_cast<int64_t>(p.bytes);
    return n;
  }
  // The host copy that replaced the tensor whose data was at `old.raw_data()` when the blocks were
  // given (LoRA fusion buffers move here); undefined when it was not one of theirs.
  Tensor host_home(const Tensor& old) const {
    if (!old.defined()) return {};
    const auto it = moved_.find(old.raw_data());
    return it == moved_.end() ? Tensor() : it->second;
  }
  const Block& host_block(int64_t i) const { return host_[static_cast<size_t>(i)]; }

  void begin() { ring_->begin(); }
  // Block i's device view, ordered after its copy on the current stream.
  const Block& acquire(int64_t i) {
    ring_->before(i);
    return device_blocks_[static_cast<size_t>(i)];
  }
  // Block i's compute is issued: its slot may be refilled after it.
  void release(int64_t i) { ring_->after(i); }
  void end() { ring_->end(); }

 private:
  Device device_;
  Visitor visit_;
  bool from_file_;
  std::vector<Block> host_, device_blocks_;
  std::vector<detail::PackedBlock> packed_;
  std::map<const void*, Tensor> moved_;
  std::unique_ptr<backend::BlockRing> ring_;
};

// One pass over a model's streamed blocks for a scope: begin() now, end() when the scope exits
// (also by an exception, so the copy stream is joined back). Null: no streaming, nothing to do.
template <class Block>
class StreamedPass {
 public:
  explicit StreamedPass(StreamedBlocks<Block>* blocks) : blocks_(blocks) {
    if (blocks_) blocks_->begin();
  }
  ~StreamedPass() {
    try {
      if (blocks_) blocks_->end();
    } catch (const std::exception& e) {
      detail::log_pass_end_failure(e);
    }
  }
  StreamedPass(const StreamedPass&) = delete;
  StreamedPass& operator=(const StreamedPass&) = delete;

 private:
  StreamedBlocks<Block>* blocks_;
};

}  // namespace ltx::models
