#pragma once
// The caching device allocator (one per device, thread-safe). Scheme (PyTorch's, see docs/CUDA.md):
//   - every request is rounded up to a multiple of 512 B;
//   - requests <= 1 MiB come from the small pool, carved out of 2 MiB segments; larger ones from
//     the large pool: 20 MiB segments for requests < 10 MiB, else the request rounded up to 2 MiB;
//   - a cached block is split when the rest is worth keeping (>= 512 B small, > 1 MiB large) and
//     freed neighbours inside a segment are merged again;
//   - blocks belong to the stream they were allocated on: a freed block is reused at once by later
//     allocations on that same stream (stream order makes this safe); a block that was also used
//     on other streams (record_stream) returns to the cache only after events recorded on those
//     streams at free time have completed;
//   - cudaMalloc is called only when no cached block fits, so steady-state loops never call it;
//     on failure the cache is released (cudaFree of unused segments) and cudaMalloc retried once,
//     then an ltx::OutOfMemory "out of GPU memory on cuda:N: ..." is thrown (the process stays
//     usable);
//   - an optional per-device limit caps the bytes held from the driver (reserved): a cudaMalloc
//     that would pass it is treated as a failed one (cache released, retried, then OutOfMemory),
//     so a memory budget is enforced, and testable, on a GPU larger than the budget.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend/cuda/stream.h"

namespace ltx::cuda {

struct AllocatorStats {
  size_t allocated_bytes = 0;       // in blocks handed out now (rounded sizes)
  size_t requested_bytes = 0;       // in blocks handed out now, as requested
  size_t reserved_bytes = 0;        // held from cudaMalloc (handed out + cached)
  size_t peak_allocated_bytes = 0;  // since start or reset_peak_stats
  size_t peak_reserved_bytes = 0;
  uint64_t num_allocs = 0;          // allocate() calls that returned memory
  uint64_t num_frees = 0;
  uint64_t num_device_mallocs = 0;  // cudaMalloc calls that succeeded
  uint64_t num_device_frees = 0;    // cudaFree calls
  uint64_t num_cache_flushes = 0;   // cache releases forced by a failed cudaMalloc
  uint64_t num_ooms = 0;            // out-of-memory errors thrown
  size_t limit_bytes = 0;           // set_memory_limit (0: none)
};

// `bytes` on `stream`'s device, for use on `stream`. The memory is returned to the cache when the
// last shared_ptr copy goes away. 0 bytes gives a null pointer (the device is still checked).
std::shared_ptr<void> allocate(size_t bytes, Stream stream);
// Same, on the calling thread's current stream of `device`.
std::shared_ptr<void> allocate(size_t bytes, int device);

// Declares that the block containing `ptr` (as returned by allocate) is used by work on `stream`
// too, so that freeing it waits for that work before the block is reused. Pointers the allocator
// does not own are ignored.
void record_stream(const void* ptr, Stream stream);

// While pinned, the cached segments of `stream` are never given back to the driver (empty_cache,
// the retry after a failed cudaMalloc): a CUDA graph captured on that stream replays into its
// freed-but-cached blocks (cuda/graph.h).
void pin_stream_memory(Stream stream, bool pinned);

// Releases every cached, fully unused segment (cudaFree), on all devices / on one device.
void empty_cache();
void empty_cache(int device);

// Caps the bytes the allocator of `device` holds from the driver (0: no cap beyond the device's
// memory). Lowering it below what is reserved now releases the cached segments; memory in use
// stays, and later requests fail until enough of it is freed.
void set_memory_limit(int device, size_t bytes);
size_t memory_limit(int device);

AllocatorStats allocator_stats(int device);
// Sets the peaks to the current values.
void reset_peak_stats(int device);

// The size a request is rounded to (a multiple of 512 B).
size_t round_allocation_size(size_t bytes);

}  // namespace ltx::cuda
