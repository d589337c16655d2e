#pragma once
// The CUDA driver's TMA tensor-map encoder for the wgmma kernels' host code (attention_wgmma.cu,
// neighborhood_attention_wgmma.cu, mlp.cu), reached through the runtime's driver entry point so
// that nothing links against libcuda.
#include <cuda.h>
#include <cudaTypedefs.h>

namespace ltx::cuda {

// cuTensorMapEncodeTiled, looked up once; throws when the driver lacks it (too old).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder();

}  // namespace ltx::cuda
