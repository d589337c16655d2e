#pragma once
// Copies with dtype conversion where at least one side is on a CUDA device. The per-element
// conversion is core's convert_element (core/dtype_element.h), so results are bit-identical to the
// CPU's Tensor::copy_from for every pair of dtypes.
//
// Strategy (see docs/CUDA.md):
//   host -> device: make the host side contiguous in its own dtype (CPU copy), one H2D transfer
//                   (large pageable sources through page-locked staging buffers, host_upload.h),
//                   then a device kernel converts/scatters into dst when dtype or layout differ;
//   device -> host: a device kernel gathers/converts into a contiguous buffer of dst's dtype when
//                   needed, one D2H transfer, the host waits for it, then a CPU scatter when dst is
//                   not contiguous;
//   device -> device (same device): cudaMemcpyAsync when both are contiguous with one dtype, else
//                   one strided convert kernel (up to 8 dims, adjacent dims collapsed first);
//   device -> other device: contiguous on the source device, cudaMemcpyPeerAsync ordered by events
//                   both ways, then convert/scatter on the destination device.
// Everything runs on the current stream of the device(s) involved; only device -> host waits.
#include "backend/cuda/stream.h"
#include "core/tensor.h"

namespace ltx::cuda {

// dst = src (same shape; any dtypes, strides and devices as long as one side is CUDA).
void copy(const Tensor& dst, const Tensor& src);

// Every element of dst (a CUDA tensor, any strides) set to the dst-dtype element at `element`
// (host memory, read before returning), on dst's current stream.
void fill(const Tensor& dst, const void* element);

// dst = src converted, both on the same CUDA device, enqueued on `stream` (of that device).
void convert_on_device(const Tensor& dst, const Tensor& src, Stream stream);

}  // namespace ltx::cuda
