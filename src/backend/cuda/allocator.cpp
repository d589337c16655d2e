#include "backend/cuda/allocator.h"

#include <cstdio>
#include <deque>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/cuda/device.h"
#include "core/error.h"
#include "core/out_of_memory.h"

namespace ltx::cuda {

namespace {

constexpr size_t kMinBlockSize = 512;             // every size is a multiple of this
constexpr size_t kSmallSize = 1 << 20;            // largest request served by the small pool
constexpr size_t kSmallBuffer = 2 << 20;          // small-pool segment size
constexpr size_t kLargeBuffer = 20 << 20;         // segment for large requests below kMinLargeAlloc
constexpr size_t kMinLargeAlloc = 10 << 20;       // from here segments are the request itself...
constexpr size_t kRoundLarge = 2 << 20;           // ...rounded up to 2 MiB
constexpr size_t kMaxRequest = size_t{1} << 62;   // beyond this no GPU can help; avoids overflow

struct Block {
  cudaStream_t stream = nullptr;
  size_t size = 0;
  void* ptr = nullptr;
  bool small = false;
  bool allocated = false;
  size_t requested = 0;
  Block* prev = nullptr;  // neighbours inside the same cudaMalloc segment
  Block* next = nullptr;
  int pending_events = 0;                 // events still to complete before reuse
  std::vector<cudaStream_t> stream_uses;  // streams other than `stream` that used the block
};

// Best fit within one stream: ordered by stream, then size, then address.
struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream)
      return reinterpret_cast<uintptr_t>(a->stream) < reinterpret_cast<uintptr_t>(b->stream);
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};
using Pool = std::set<Block*, BlockLess>;

size_t segment_size(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}

  Block* malloc(size_t requested, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceGuard guard(device_);
    process_events();
    if (requested > kMaxRequest) throw_oom(requested);
    const size_t size = round_allocation_size(requested);
    Pool& pool = size <= kSmallSize ? small_ : large_;
    Block* block = take_cached(pool, stream, size);
    if (block == nullptr) block = new_segment(size, stream, requested);
    if (should_split(block, size)) {
      auto* rest = new Block();
      rest->stream = stream;
      rest->size = block->size - size;
      rest->ptr = static_cast<char*>(block->ptr) + size;
      rest->small = block->small;
      rest->prev = block;
      rest->next = block->next;
      if (rest->next != nullptr) rest->next->prev = rest;
      block->next = rest;
      block->size = size;
      pool.insert(rest);
    }
    block->allocated = true;
    block->requested = requested;
    active_[block->ptr] = block;
    stats_.allocated_bytes += block->size;
    stats_.requested_bytes += requested;
    stats_.num_allocs += 1;
    if (stats_.allocated_bytes > stats_.peak_allocated_bytes)
      stats_.peak_allocated_bytes = stats_.allocated_bytes;
    return block;
  }

  // Never throws: runs inside shared_ptr deleters.
  void free(Block* block) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    block->allocated = false;
    active_.erase(block->ptr);
    stats_.allocated_bytes -= block->size;
    stats_.requested_bytes -= block->requested;
    stats_.num_frees += 1;
    if (!block->stream_uses.empty()) {
      int prev_device = -1;
      if (cudaGetDevice(&prev_device) != cudaSuccess) prev_device = -1;
      (void)cudaSetDevice(device_);
      for (cudaStream_t s : block->stream_uses) {
        cudaEvent_t ev = get_event();
        if (ev != nullptr && cudaEventRecord(ev, s) == cudaSuccess) {
          pending_.emplace_back(ev, block);
          block->pending_events += 1;
        } else if (ev != nullptr) {
          // Could not record: wait for the stream instead of risking an early reuse.
          (void)cudaStreamSynchronize(s);
          events_.push_back(ev);
        } else {
          (void)cudaStreamSynchronize(s);
        }
      }
      (void)cudaGetLastError();
      block->stream_uses.clear();
      if (prev_device >= 0) (void)cudaSetDevice(prev_device);
      if (block->pending_events > 0) return;
    }
    return_to_pool(block);
  }

  void record_stream(const void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(const_cast<void*>(ptr));
    if (it == active_.end()) return;
    Block* b = it->second;
    if (stream == b->stream) return;
    for (cudaStream_t s : b->stream_uses)
      if (s == stream) return;
    b->stream_uses.push_back(stream);
  }

  void pin_stream(cudaStream_t stream, bool pinned) {
    std::lock_guard<std::mutex> lock(mu_);
    if (pinned) {
      pinned_.insert(stream);
    } else {
      pinned_.erase(stream);
    }
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceGuard guard(device_);
    release_cached();
  }

  AllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void reset_peaks() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
  }

  void set_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.limit_bytes = bytes;
    if (bytes != 0 && stats_.reserved_bytes > bytes) {
      DeviceGuard guard(device_);
      release_cached();
    }
  }

  size_t limit() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_.limit_bytes;
  }

 private:
  Block* take_cached(Pool& pool, cudaStream_t stream, size_t size) {
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    pool.erase(it);
    return b;
  }

  static bool should_split(const Block* b, size_t size) {
    const size_t rest = b->size - size;
    return b->small ? rest >= kMinBlockSize : rest > kSmallSize;
  }

  bool within_limit(size_t bytes) const {
    return stats_.limit_bytes == 0 || (stats_.reserved_bytes <= stats_.limit_bytes &&
                                       bytes <= stats_.limit_bytes - stats_.reserved_bytes);
  }

  // cudaMalloc, or cudaErrorMemoryAllocation without calling it when the limit would be passed.
  cudaError_t device_malloc(void** ptr, size_t bytes) {
    if (!within_limit(bytes)) return cudaErrorMemoryAllocation;
    return cudaMalloc(ptr, bytes);
  }

  Block* new_segment(size_t size, cudaStream_t stream, size_t requested) {
    const size_t bytes = segment_size(size);
    void* ptr = nullptr;
    cudaError_t err = device_malloc(&ptr, bytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // not sticky: clear it and retry with the cache released
      stats_.num_cache_flushes += 1;
      release_cached();
      err = device_malloc(&ptr, bytes);
      if (err == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        throw_oom(requested);
      }
    }
    LTX_CUDA_CHECK(err);
    stats_.num_device_mallocs += 1;
    stats_.reserved_bytes += bytes;
    if (stats_.reserved_bytes > stats_.peak_reserved_bytes)
      stats_.peak_reserved_bytes = stats_.reserved_bytes;
    auto* b = new Block();
    b->stream = stream;
    b->size = bytes;
    b->ptr = ptr;
    b->small = size <= kSmallSize;
    return b;
  }

  [[noreturn]] void throw_oom(size_t requested) {
    stats_.num_ooms += 1;
    OutOfMemoryReport r;
    r.device = device_;
    r.requested_bytes = requested;
    r.allocated_bytes = stats_.allocated_bytes;
    r.limit_bytes = stats_.limit_bytes;
    r.reserved_bytes = stats_.reserved_bytes;
    if (cudaMemGetInfo(&r.free_bytes, &r.total_bytes) != cudaSuccess) (void)cudaGetLastError();
    r.scope = memory_scope();
    throw OutOfMemory(std::move(r));
  }

  // Merges `b` with free neighbours of its segment and puts the result into its pool.
  void return_to_pool(Block* b) {
    Pool& pool = b->small ? small_ : large_;
    auto mergeable = [](const Block* n) {
      return n != nullptr && !n->allocated && n->pending_events == 0;
    };
    if (mergeable(b->prev)) {
      Block* p = b->prev;
      pool.erase(p);
      p->size += b->size;
      p->next = b->next;
      if (p->next != nullptr) p->next->prev = p;
      delete b;
      b = p;
    }
    if (mergeable(b->next)) {
      Block* n = b->next;
      pool.erase(n);
      b->size += n->size;
      b->next = n->next;
      if (b->next != nullptr) b->next->prev = b;
      delete n;
    }
    pool.insert(b);
  }

  // Moves blocks whose cross-stream events have completed back into the pools.
  void process_events() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      const cudaError_t err = cudaEventQuery(it->first);
      if (err == cudaErrorNotReady) {
        (void)cudaGetLastError();
        ++it;
        continue;
      }
      LTX_CUDA_CHECK(err);
      Block* b = it->second;
      events_.push_back(it->first);
      it = pending_.erase(it);
      if (--b->pending_events == 0) return_to_pool(b);
    }
  }

  // Waits for every pending event, then cudaFrees every segment that is entirely unused.
  void release_cached() {
    for (auto& [ev, b] : pending_) {
      LTX_CUDA_CHECK(cudaEventSynchronize(ev));
      events_.push_back(ev);
      if (--b->pending_events == 0) return_to_pool(b);
    }
    pending_.clear();
    // Blocks returned to the cache may still be read by kernels in flight on their stream.
    LTX_CUDA_CHECK(cudaDeviceSynchronize());
    for (Pool* pool : {&small_, &large_}) {
      for (auto it = pool->begin(); it != pool->end();) {
        Block* b = *it;
        if (b->prev != nullptr || b->next != nullptr || pinned_.count(b->stream) != 0) {
          ++it;
          continue;
        }
        LTX_CUDA_CHECK(cudaFree(b->ptr));
        stats_.num_device_frees += 1;
        stats_.reserved_bytes -= b->size;
        it = pool->erase(it);
        delete b;
      }
    }
  }

  cudaEvent_t get_event() noexcept {
    if (!events_.empty()) {
      cudaEvent_t e = events_.back();
      events_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return e;
  }

  const int device_;
  std::mutex mu_;
  Pool small_, large_;
  std::set<cudaStream_t> pinned_;  // streams whose cached segments stay (pin_stream_memory)
  std::unordered_map<void*, Block*> active_;
  std::deque<std::pair<cudaEvent_t, Block*>> pending_;
  std::vector<cudaEvent_t> events_;
  AllocatorStats stats_;
};

// One allocator per device, created on first use and deliberately leaked: tensors destroyed during
// static destruction still return their blocks to a live allocator.
DeviceAllocator& device_allocator(int device) {
  static std::mutex mu;
  static std::vector<DeviceAllocator*>* allocators = new std::vector<DeviceAllocator*>();
  check_device(device, "CUDA allocator");
  std::lock_guard<std::mutex> lock(mu);
  if (allocators->empty()) allocators->assign(static_cast<size_t>(device_count()), nullptr);
  DeviceAllocator*& a = (*allocators)[static_cast<size_t>(device)];
  if (a == nullptr) a = new DeviceAllocator(device);
  return *a;
}

}  // namespace

size_t round_allocation_size(size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  if (bytes > kMaxRequest) return bytes;
  return (bytes + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

std::shared_ptr<void> allocate(size_t bytes, Stream stream) {
  DeviceAllocator& alloc = device_allocator(stream.device());
  if (bytes == 0) return std::shared_ptr<void>(nullptr, [](void*) {});
  Block* block = alloc.malloc(bytes, stream.handle());
  return std::shared_ptr<void>(block->ptr, [&alloc, block](void*) { alloc.free(block); });
}

std::shared_ptr<void> allocate(size_t bytes, int device) {
  check_device(device, "CUDA allocation");
  return allocate(bytes, current_stream(device));
}

void record_stream(const void* ptr, Stream stream) {
  if (ptr == nullptr) return;
  device_allocator(stream.device()).record_stream(ptr, stream.handle());
}

void pin_stream_memory(Stream stream, bool pinned) {
  device_allocator(stream.device()).pin_stream(stream.handle(), pinned);
}

void empty_cache() {
  for (int d = 0; d < device_count(); ++d) device_allocator(d).empty_cache();
}

void empty_cache(int device) { device_allocator(device).empty_cache(); }

void set_memory_limit(int device, size_t bytes) { device_allocator(device).set_limit(bytes); }

size_t memory_limit(int device) { return device_allocator(device).limit(); }

AllocatorStats allocator_stats(int device) { return device_allocator(device).stats(); }

void reset_peak_stats(int device) { device_allocator(device).reset_peaks(); }

}  // namespace ltx::cuda
