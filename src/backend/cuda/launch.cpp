#include "backend/cuda/launch.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "backend/cuda/device.h"

namespace ltx::cuda {

int resident_blocks_per_sm(const void* kernel, int threads, size_t smem, int dev) {
  using Key = std::tuple<const void*, int, size_t, int>;
  static std::mutex mu;
  static auto* memo = new std::map<Key, int>();  // leaked: launches may come during exit
  const Key key{kernel, threads, smem, dev};
  std::lock_guard<std::mutex> lock(mu);
  if (const auto it = memo->find(key); it != memo->end()) return it->second;
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: clear it, and assume one block
    per_sm = 1;
  }
  per_sm = std::max(per_sm, 1);
  memo->emplace(key, per_sm);
  return per_sm;
}

void allow_dynamic_smem(const void* kernel, size_t smem) {
  if (smem <= 32 * 1024) return;
  static std::mutex mu;
  static auto* done = new std::map<std::pair<const void*, int>, size_t>();  // leaked, as above
  int dev = 0;
  LTX_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  size_t& allowed = (*done)[{kernel, dev}];
  if (smem <= allowed) return;
  LTX_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
  allowed = smem;
}

}  // namespace ltx::cuda
