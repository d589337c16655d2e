#pragma once
// Launch-shape helpers shared by the backend's kernels.
#include <algorithm>
#include <cstddef>
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

// Blocks of `kernel` resident per multiprocessor of device `dev` (the current one) at `threads`
// threads and `smem` dynamic bytes (at least 1): the occupancy API's answer, asked once per
// (kernel, threads, smem, device) and kept, since resident-grid launches need it on every call.
int resident_blocks_per_sm(const void* kernel, int threads, size_t smem, int dev);

// Blocks of `threads` threads and `smem` dynamic bytes that fit on the device at once (at least
// one per multiprocessor), at most `rows`: the grid of a block-per-row kernel whose blocks should
// each see many rows (values kept in shared memory across rows, the next row staged early).
template <typename Kernel>
unsigned resident_grid(Kernel kernel, int threads, size_t smem, int64_t rows, int dev) {
  const int per_sm = resident_blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem, dev);
  const int64_t cap = static_cast<int64_t>(multiprocessor_count(dev)) * per_sm;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(rows, cap)));
}

// Lets `kernel` launch with `smem` dynamic bytes beyond the default 48 KiB (on the current
// device; each device once per kernel and size). Above 32 KiB: with the kernel's static shared
// memory, less than 48 KiB of dynamic memory can already pass the default (a 48 KiB staged row
// failed to launch); at or below it nothing is done, so launches may call it unconditionally.
void allow_dynamic_smem(const void* kernel, size_t smem);

}  // namespace ltx::cuda
