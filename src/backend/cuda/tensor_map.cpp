#include "backend/cuda/tensor_map.h"

#include <cuda_runtime.h>

#include "backend/cuda/device.h"
#include "core/error.h"

namespace ltx::cuda {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    LTX_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                    cudaEnableDefault, &found));
    LTX_CHECK(found == cudaDriverEntryPointSuccess && f != nullptr,
              "wgmma kernels: the CUDA driver has no cuTensorMapEncodeTiled (driver too old)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace ltx::cuda
