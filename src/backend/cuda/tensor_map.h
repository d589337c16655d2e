#pragma once
// The CUDA driver's TMA tensor-map encoder for the wgmma kernels' host code (attention_wgmma.cu,
// neighborhood_attention_wgmma.cu, mlp.cu), reached through the runtime's driver entry point so
// that nothing links against libcuda.
#include <cuda.h>
#include <cudaTypedefs.h>

#include "core/tensor.h"

namespace ltx::cuda {

// cuTensorMapEncodeTiled, looked up once; throws when the driver lacks it (too old).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder();

// The TMA map every wgmma kernel uses: bf16 elements from `base`, `rank` dims (innermost first,
// dims[0] dense) with the byte strides of dims 1 .. rank - 1, boxes of `box` elements, the
// 128-byte swizzle, 256-byte L2 promotion, elements past the dims read as zeros. A failure is an
// error naming `op` and the operand `t`.
CUtensorMap bf16_swizzled_tensor_map(const void* base, int rank, const cuuint64_t* dims,
                                     const cuuint64_t* strides, const cuuint32_t* box,
                                     const char* op, const Tensor& t);

}  // namespace ltx::cuda
