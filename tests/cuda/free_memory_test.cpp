// backend::free_memory_bytes on a GPU, as the diffusion decoder's tiling budget of `ltx generate
// --device cuda` reads it: the driver's free memory, which blocks held in the caching allocator
// (live or cached) do not count until the cache is released.
#include <gtest/gtest.h>

#include "backend/cuda/device.h"
#include "backend/device_query.h"
#include "cuda/cuda_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

TEST(FreeMemory, GpuFreeMemoryShrinksWithHeldBlocksAndGrowsWhenTheCacheIsReleased) {
  LTX_REQUIRE_CUDA();
  const Device gpu = test::kGpu;
  backend::release_cached_memory(gpu);
  const int64_t total = static_cast<int64_t>(cuda::memory_info(gpu.index).total_bytes);
  const int64_t before = backend::free_memory_bytes(gpu);
  EXPECT_GT(before, 0);
  EXPECT_LE(before, total);
  constexpr int64_t kBlock = int64_t{1} << 30;
  {
    const Tensor held = Tensor::empty({kBlock}, DType::U8, gpu);
    EXPECT_LE(backend::free_memory_bytes(gpu), before - kBlock + (int64_t{64} << 20));
  }
  // Freed into the allocator's cache: still reserved, so still not available.
  EXPECT_LE(backend::free_memory_bytes(gpu), before - kBlock + (int64_t{64} << 20));
  backend::release_cached_memory(gpu);
  EXPECT_GE(backend::free_memory_bytes(gpu), before - (int64_t{64} << 20));
}

}  // namespace
}  // namespace ltx
