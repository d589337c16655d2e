#include "core/storage.h"

#include <cstdlib>
#include <new>

#include "core/device_hooks.h"
#include "core/error.h"

namespace ltx {

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  if (device.is_cuda()) {
    std::shared_ptr<void> block = detail::cuda_allocate(bytes, device.index);
    void* p = block.get();
    return std::make_shared<Storage>(p, bytes, device, std::move(block));
  }
  constexpr size_t kAlign = 64;
  const size_t rounded = ((bytes + kAlign - 1) / kAlign) * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  if (p == nullptr)
    fail("out of host memory: could not allocate ", bytes,
         " bytes (reduce the resolution, frame count or tile size, or free memory)");
  std::shared_ptr<void> owner(p, [](void* q) { std::free(q); });
  return std::make_shared<Storage>(p, bytes, device, std::move(owner));
}

}  // namespace ltx
