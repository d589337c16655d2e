#pragma once
// Launch-shape helpers shared by the backend's kernels.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/device.h"

namespace ltx::cuda {

// Blocks for a grid-stride loop over n items with `threads` per block: enough to cover n, capped
// at 32 blocks per SM (more only adds scheduling overhead for a grid-stride loop).
inline unsigned grid_for(int64_t n, int threads, int device) {
  const int64_t want = (n + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(multiprocessor_count(device)) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(want, cap)));
}

}  // namespace ltx::cuda
