#include "backend/block_ring.h"

#include "core/error.h"
#if LTX_WITH_CUDA
#include "backend/cuda/block_ring.h"
#endif

namespace ltx::backend {

namespace {

[[noreturn]] void no_gpu(Device device) {
  throw Error(str("--offload: block streaming copies blocks to a GPU; ", device.str(),
                  " has nothing to stream to (use --offload none, or --device cuda in a build "
                  "with CUDA)"));
}

}  // namespace

std::shared_ptr<void> streaming_host_allocate(size_t bytes, Device device) {
#if LTX_WITH_CUDA
  if (device.is_cuda()) return cuda::pinned_host_allocate(bytes);
#else
  (void)bytes;
#endif
  no_gpu(device);
}

struct BlockRing::Impl {
#if LTX_WITH_CUDA
  std::unique_ptr<cuda::BlockRing> ring;
#endif
};

BlockRing::BlockRing(Device device, std::vector<const void*> host, std::vector<size_t> bytes,
                     int64_t slots)
    : impl_(std::make_unique<Impl>()) {
#if LTX_WITH_CUDA
  if (device.is_cuda()) {
    impl_->ring =
        std::make_unique<cuda::BlockRing>(device.index, std::move(host), std::move(bytes), slots);
    return;
  }
#else
  (void)host;
  (void)bytes;
  (void)slots;
#endif
  no_gpu(device);
}

BlockRing::BlockRing(Device device, std::vector<size_t> bytes, int64_t slots, Fill fill)
    : impl_(std::make_unique<Impl>()) {
#if LTX_WITH_CUDA
  if (device.is_cuda()) {
    impl_->ring = std::make_unique<cuda::BlockRing>(device.index, std::move(bytes), slots,
                                                    std::move(fill));
    return;
  }
#else
  (void)bytes;
  (void)slots;
  (void)fill;
#endif
  no_gpu(device);
}

BlockRing::~BlockRing() = default;

#if LTX_WITH_CUDA
const BlockSchedule& BlockRing::schedule() const { return impl_->ring->schedule(); }

std::shared_ptr<void> BlockRing::slot(int64_t slot) const {
  // An aliasing pointer: the ring (and so the slot) lives as long as the model that holds both.
  return std::shared_ptr<void>(std::shared_ptr<void>(), impl_->ring->slot_data(slot));
}

int64_t BlockRing::device_bytes() const {
  return static_cast<int64_t>(impl_->ring->slot_bytes()) * impl_->ring->schedule().slots();
}

void BlockRing::begin() { impl_->ring->begin(); }
void BlockRing::before(int64_t block) { impl_->ring->before(block); }
void BlockRing::after(int64_t block) { impl_->ring->after(block); }
void BlockRing::end() { impl_->ring->end(); }
#else
// Never constructed without CUDA (the constructor throws).
const BlockSchedule& BlockRing::schedule() const { throw Error("block streaming: no CUDA"); }
std::shared_ptr<void> BlockRing::slot(int64_t) const { throw Error("block streaming: no CUDA"); }
int64_t BlockRing::device_bytes() const { return 0; }
void BlockRing::begin() {}
void BlockRing::before(int64_t) {}
void BlockRing::after(int64_t) {}
void BlockRing::end() {}
#endif

}  // namespace ltx::backend
