// Core's entry points into the CUDA backend (declared in core/device_hooks.h).
#include "backend/cuda/allocator.h"
#include "backend/cuda/copy.h"
#include "backend/cuda/device.h"
#include "core/device_hooks.h"

namespace ltx::detail {

std::shared_ptr<void> cuda_allocate(size_t bytes, int index) {
  return cuda::allocate(bytes, index);
}

void cuda_copy(const Tensor& dst, const Tensor& src) { cuda::copy(dst, src); }

void cuda_fill(const Tensor& dst, const void* element) { cuda::fill(dst, element); }

void cuda_set_memory_limit(int index, size_t bytes) { cuda::set_memory_limit(index, bytes); }

size_t cuda_total_memory(int index) { return cuda::memory_info(index).total_bytes; }

bool cuda_compiled() { return true; }

}  // namespace ltx::detail
