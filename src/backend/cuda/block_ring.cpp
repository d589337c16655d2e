#include "backend/cuda/block_ring.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "backend/cuda/allocator.h"
#include "backend/cuda/device.h"
#include "core/error.h"
#include "core/parallel.h"

namespace ltx::cuda {

namespace {

[[noreturn]] void pinning_failed(size_t bytes, cudaError_t e) {
  throw Error(str("block streaming: cannot page-lock ", bytes, " bytes of host memory for the "
                  "streamed blocks (", cudaGetErrorString(e),
                  "); free host memory or run without --offload"));
}

}  // namespace

std::shared_ptr<void> pinned_host_allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  // Anonymous memory in transparent huge pages, touched by every thread, then registered with the
  // driver: page-locking 2 MiB pages that already exist runs about 7x faster than cudaHostAlloc's
  // own allocation (bench/RESULTS.md), which is most of putting a streamed model in host memory.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) {
    (void)madvise(p, bytes, MADV_HUGEPAGE);  // a kernel without THP still gives 4 KiB pages
    auto* base = static_cast<unsigned char*>(p);
    constexpr int64_t kChunk = int64_t{64} << 20;
    parallel_for(0, static_cast<int64_t>((bytes + kChunk - 1) / kChunk), 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        const size_t at = static_cast<size_t>(c * kChunk);
        std::memset(base + at, 0, std::min(static_cast<size_t>(kChunk), bytes - at));
      }
    });
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e == cudaSuccess)
      return std::shared_ptr<void>(p, [bytes](void* q) {
        (void)cudaHostUnregister(q);
        munmap(q, bytes);
      });
    (void)cudaGetLastError();
    munmap(p, bytes);
  }
  // Where registration is refused, the driver's own page-locked allocation.
  void* q = nullptr;
  const cudaError_t e = cudaHostAlloc(&q, bytes, cudaHostAllocDefault);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    pinning_failed(bytes, e);
  }
  return std::shared_ptr<void>(q, [](void* r) { cudaFreeHost(r); });
}

BlockRing::BlockRing(int device, std::vector<const void*> host, std::vector<size_t> bytes,
                     int64_t slots)
    : device_(device),
      host_(std::move(host)),
      bytes_(std::move(bytes)),
      schedule_(static_cast<int64_t>(host_.size()), slots),
      copy_stream_(device) {
  LTX_CHECK(host_.size() == bytes_.size(), "block streaming: ", host_.size(), " blocks but ",
            bytes_.size(), " sizes");
  for (size_t b : bytes_) slot_bytes_ = std::max(slot_bytes_, b);
  const int64_t n = schedule_.slots();
  // The slots stay allocated while the ring lives; the destructor waits for the device before
  // they go back to the cache, whichever streams read and wrote them.
  for (int64_t s = 0; s < n; ++s) slots_.push_back(allocate(slot_bytes_, device_));
  loaded_.resize(static_cast<size_t>(n));
  released_.resize(static_cast<size_t>(n));
  released_in_pass_.assign(static_cast<size_t>(n), false);
}

BlockRing::BlockRing(int device, std::vector<size_t> bytes, int64_t slots, Fill fill)
    : BlockRing(device, std::vector<const void*>(bytes.size(), nullptr), bytes, slots) {
  fill_ = std::move(fill);
  for (int i = 0; i < 2; ++i) staging_.push_back(pinned_host_allocate(slot_bytes_));
  staged_.resize(staging_.size());
}

BlockRing::~BlockRing() {
  DeviceGuard guard(device_);
  (void)cudaDeviceSynchronize();
}

void BlockRing::load(int64_t block) {
  const int64_t s = schedule_.slot_of(block);
  const Stream copy = copy_stream_.get();
  // The slot's previous block of this pass must be done computing before its bytes are
  // overwritten (earlier passes are behind begin()'s fork already).
  if (released_in_pass_[static_cast<size_t>(s)]) released_[static_cast<size_t>(s)].wait(copy);
  const size_t n = bytes_[static_cast<size_t>(block)];
  const void* src = host_[static_cast<size_t>(block)];
  Event* staged = nullptr;
  if (fill_) {
    const size_t k = next_staging_++ % staging_.size();
    staged = &staged_[k];
    staged->synchronize();  // its previous block has reached its slot
    fill_(block, staging_[k].get());
    src = staging_[k].get();
  }
  if (n > 0)
    LTX_CUDA_CHECK(cudaMemcpyAsync(slots_[static_cast<size_t>(s)].get(), src, n,
                                   cudaMemcpyHostToDevice, copy.handle()));
  if (staged) staged->record(copy);
  loaded_[static_cast<size_t>(s)].record(copy);
}

void BlockRing::begin() {
  DeviceGuard guard(device_);
  compute_ = current_stream(device_);
  // The copies of this pass start after everything queued on the compute stream so far (the
  // previous pass's blocks included), so no event of an earlier pass is waited on.
  start_.record(compute_);
  start_.wait(copy_stream_.get());
  released_in_pass_.assign(released_in_pass_.size(), false);
  for (int64_t b : schedule_.initial_loads()) load(b);
}

void BlockRing::before(int64_t block) {
  loaded_[static_cast<size_t>(schedule_.slot_of(block))].wait(compute_);
}

void BlockRing::after(int64_t block) {
  const int64_t s = schedule_.slot_of(block);
  released_[static_cast<size_t>(s)].record(compute_);
  released_in_pass_[static_cast<size_t>(s)] = true;
  if (const auto next = schedule_.load_after(block)) {
    DeviceGuard guard(device_);
    load(*next);
  }
}

void BlockRing::end() {
  finished_.record(copy_stream_.get());
  finished_.wait(compute_);
}

}  // namespace ltx::cuda
