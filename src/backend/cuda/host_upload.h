#pragma once
// Host -> device transfers, the path every weight takes to the GPU (docs/CUDA.md "How weights
// reach the GPU"). cudaMemcpyAsync from pageable memory (a mapped weights file, a std::vector)
// makes the driver stage the bytes through its own small page-locked buffers on one thread, which
// caps it at a fraction of the link. Large pageable copies are therefore staged here instead:
// chunks are copied by the CPU thread pool into a few page-locked buffers owned per device, and
// each buffer is DMA'd while the next one fills. Page-locked, registered and managed sources, and
// small copies, go straight to cudaMemcpyAsync.
#include <cstddef>

#include "backend/cuda/stream.h"

namespace ltx::cuda {

// Copies from pageable memory of at least this size are staged. Smaller ones take well under a
// millisecond on the driver's path; the staged path's fixed costs (a pointer query, a thread-pool
// dispatch and an event wait per chunk) would be a noticeable part of them, and the models' many
// small tensors (norms, biases, tables) are below it while every large weight matrix is above it.
inline constexpr size_t kStagedUploadMinBytes = size_t{4} << 20;
// Size and number of a device's staging buffers: a chunk takes ~0.6 ms on PCIe 5 x16, long enough
// that the per-chunk costs stay a few percent, and four of them let the fill run ahead of the DMA.
// 128 MiB of page-locked host memory per device that ever staged an upload, allocated on the first
// one and kept for the process (it is host memory the OS cannot swap or reclaim).
inline constexpr size_t kStagingChunkBytes = size_t{32} << 20;
inline constexpr int kStagingBuffers = 4;

enum class UploadPath { Direct, Staged };

// The path upload_to_device takes for `bytes` at host address `src` onto `device`: Staged for a
// pageable source of at least kStagedUploadMinBytes when the device's staging buffers exist
// (allocates them on the first such call; Direct from then on where that failed).
UploadPath upload_path(int device, const void* src, size_t bytes);

// Copies `bytes` from host memory `src` to device memory `dst` of s.device(), enqueued on `s`
// (ordered with the stream's earlier and later work as a cudaMemcpyAsync would be). Returns once
// `src` has been read: the caller may free or overwrite it then. Safe to call from several
// threads at once, including from inside parallel_for tasks.
void upload_to_device(void* dst, const void* src, size_t bytes, Stream s);

}  // namespace ltx::cuda
