#include "backend/cuda/host_upload.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "backend/cuda/device.h"
#include "core/error.h"
#include "core/parallel.h"

namespace ltx::cuda {

namespace {

// Each pool thread copies at least this much of a chunk: large enough that dispatch is cheap next
// to the copy, small enough that a 32 MiB chunk spreads over every core.
constexpr int64_t kStagingFillGrain = int64_t{1} << 20;

struct StagingBuffer {
  void* host = nullptr;          // kStagingChunkBytes of page-locked memory
  cudaEvent_t copied = nullptr;  // this buffer's last DMA to the device
  bool recorded = false;         // `copied` has been recorded at least once
  bool busy = false;             // claimed by a thread that is filling it or issuing its copy
};

// One device's staging buffers. A thread claims one buffer per chunk and gives it back once the
// chunk's copy is issued, so it never holds more than one while it waits for the thread pool;
// threads that already run inside a pool task never wait for a buffer (see claim_staging_buffer).
struct StagingSet {
  std::mutex mu;
  std::condition_variable released;
  bool tried = false;      // the allocation was attempted (once per process)
  bool available = false;  // ... and succeeded
  std::vector<StagingBuffer> buffers;
  size_t next = 0;  // round-robin start: the least recently issued buffer comes first
};

// Allocates the buffers on first use; false when page-locked memory or events cannot be had, in
// which case the copies go direct (slower, never an error). Called with set.mu held.
bool ensure_staging_buffers(StagingSet& set, int device) {
  if (set.tried) return set.available;
  set.tried = true;
  DeviceGuard guard(device);
  for (int i = 0; i < kStagingBuffers; ++i) {
    StagingBuffer b;
    if (cudaHostAlloc(&b.host, kStagingChunkBytes, cudaHostAllocDefault) != cudaSuccess) {
      (void)cudaGetLastError();
      break;
    }
    if (cudaEventCreateWithFlags(&b.copied, cudaEventDisableTiming) != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaFreeHost(b.host);
      break;
    }
    set.buffers.push_back(b);
  }
  if (static_cast<int>(set.buffers.size()) == kStagingBuffers) {
    set.available = true;
    return true;
  }
  for (StagingBuffer& b : set.buffers) {
    (void)cudaEventDestroy(b.copied);
    (void)cudaFreeHost(b.host);
  }
  set.buffers.clear();
  return false;
}

// The device's staging set (never destroyed: uploads may run during static destruction), with its
// buffers allocated; nullptr where they could not be.
StagingSet* staging_set(int device) {
  static std::mutex registry_mu;
  static auto* registry = new std::vector<StagingSet*>();
  StagingSet* set = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    if (registry->empty())
      registry->assign(static_cast<size_t>(std::max(device_count(), 1)), nullptr);
    if (device < 0 || static_cast<size_t>(device) >= registry->size()) return nullptr;
    StagingSet*& slot = (*registry)[static_cast<size_t>(device)];
    if (slot == nullptr) slot = new StagingSet();
    set = slot;
  }
  std::lock_guard<std::mutex> lock(set->mu);
  return ensure_staging_buffers(*set, device) ? set : nullptr;
}

// True for plain pageable host memory: not page-locked (cudaHostAlloc), registered
// (cudaHostRegister) or managed, which the DMA engines read directly.
bool is_pageable(const void* src) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, src) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return attributes.type == cudaMemoryTypeUnregistered;
}

// A free buffer of `set`, marked busy; -1 when none is free and the caller must not wait. A thread
// inside a pool task must not wait: a buffer's holder may be a thread outside the pool that waits
// for the pool to finish the very job this thread is part of.
int claim_staging_buffer(StagingSet& set, bool may_wait) {
  std::unique_lock<std::mutex> lock(set.mu);
  const size_t n = set.buffers.size();
  for (;;) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (set.next + k) % n;
      if (set.buffers[i].busy) continue;
      set.buffers[i].busy = true;
      set.next = (i + 1) % n;
      return static_cast<int>(i);
    }
    if (!may_wait) return -1;
    set.released.wait(lock);
  }
}

// Gives a claimed buffer back when its chunk is issued (or the issue failed).
class StagingClaim {
 public:
  StagingClaim(StagingSet& set, int index) : set_(set), index_(index) {}
  ~StagingClaim() {
    {
      std::lock_guard<std::mutex> lock(set_.mu);
      set_.buffers[static_cast<size_t>(index_)].busy = false;
    }
    set_.released.notify_one();
  }
  StagingClaim(const StagingClaim&) = delete;
  StagingClaim& operator=(const StagingClaim&) = delete;
  StagingBuffer& buffer() const { return set_.buffers[static_cast<size_t>(index_)]; }

 private:
  StagingSet& set_;
  int index_;
};

void direct_upload(void* dst, const void* src, size_t bytes, Stream s) {
  if (bytes == 0) return;
  LTX_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s.handle()));
}

// The staging set a copy of `bytes` from `src` goes through; nullptr: a direct copy.
StagingSet* staging_for(int device, const void* src, size_t bytes) {
  if (bytes < kStagedUploadMinBytes || !is_pageable(src)) return nullptr;
  return staging_set(device);
}

}  // namespace

UploadPath upload_path(int device, const void* src, size_t bytes) {
  return staging_for(device, src, bytes) != nullptr ? UploadPath::Staged : UploadPath::Direct;
}

void upload_to_device(void* dst, const void* src, size_t bytes, Stream s) {
  if (bytes == 0) return;
  DeviceGuard guard(s.device());
  StagingSet* set = staging_for(s.device(), src, bytes);
  if (set == nullptr) return direct_upload(dst, src, bytes, s);
  const bool may_wait = !inside_parallel_for();
  auto* out = static_cast<unsigned char*>(dst);
  const auto* in = static_cast<const unsigned char*>(src);
  for (size_t at = 0; at < bytes; at += kStagingChunkBytes) {
    const size_t len = std::min(kStagingChunkBytes, bytes - at);
    const int index = claim_staging_buffer(*set, may_wait);
    // Every buffer is being filled by other threads: the rest goes direct, still in stream order.
    if (index < 0) return direct_upload(out + at, in + at, bytes - at, s);
    const StagingClaim claim(*set, index);
    StagingBuffer& b = claim.buffer();
    if (b.recorded) LTX_CUDA_CHECK(cudaEventSynchronize(b.copied));  // its last chunk has left
    auto* staging = static_cast<unsigned char*>(b.host);
    parallel_for(0, static_cast<int64_t>(len), kStagingFillGrain, [&](int64_t lo, int64_t hi) {
      std::memcpy(staging + lo, in + at + lo, static_cast<size_t>(hi - lo));
    });
    LTX_CUDA_CHECK(cudaMemcpyAsync(out + at, staging, len, cudaMemcpyHostToDevice, s.handle()));
    LTX_CUDA_CHECK(cudaEventRecord(b.copied, s.handle()));
    b.recorded = true;
  }
}

}  // namespace ltx::cuda
