#pragma once
// The few things core needs from a GPU backend: memory and copies. Core declares them; the CUDA
// backend defines them (src/backend/cuda/hooks.cpp), or src/backend/cuda_absent.cpp does in a
// build without CUDA, where every call explains that the build has no CUDA support.
#include <cstddef>
#include <memory>

namespace ltx {
class Tensor;
namespace detail {

// Allocates `bytes` on CUDA device `index` through the backend's caching allocator.
std::shared_ptr<void> cuda_allocate(size_t bytes, int index);
// dst = src (same shape), where at least one of them lives on a CUDA device; converts dtypes
// with the same rounding rules as the CPU conversion. Stream-ordered on the current stream.
void cuda_copy(const Tensor& dst, const Tensor& src);
// Sets every element of dst (on a CUDA device) to the element whose bytes are at `element`
// (dst's dtype, already converted), on the device. Stream-ordered on the current stream.
void cuda_fill(const Tensor& dst, const void* element);
// Caps the bytes the caching allocator of CUDA device `index` holds from the driver (0: no cap);
// past it, allocations fail with ltx::OutOfMemory as if the device were full (--max-gpu-memory).
void cuda_set_memory_limit(int index, size_t bytes);
// Total memory of CUDA device `index`, in bytes.
size_t cuda_total_memory(int index);
// True when this build has the CUDA backend compiled in (whether or not a GPU is present).
bool cuda_compiled();

}  // namespace detail
}  // namespace ltx
