// Compiled instead of src/backend/cuda/ when the build has no CUDA backend (LTX_CUDA=OFF or no
// nvcc): every CUDA request fails with an explanation instead of a link error.
#include "core/device_hooks.h"
#include "core/error.h"

namespace ltx::detail {

namespace {
[[noreturn]] void no_cuda() {
  fail("this ltx build has no CUDA backend (configured with LTX_CUDA=OFF or without nvcc); "
       "use --device cpu or rebuild with the CUDA toolkit installed");
}
}  // namespace

std::shared_ptr<void> cuda_allocate(size_t, int) { no_cuda(); }
void cuda_copy(const Tensor&, const Tensor&) { no_cuda(); }
void cuda_fill(const Tensor&, const void*) { no_cuda(); }
void cuda_set_memory_limit(int, size_t) { no_cuda(); }
size_t cuda_total_memory(int) { no_cuda(); }
bool cuda_compiled() { return false; }

}  // namespace ltx::detail
