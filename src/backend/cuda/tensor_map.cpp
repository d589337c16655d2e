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

CUtensorMap bf16_swizzled_tensor_map(const void* base, int rank, const cuuint64_t* dims,
                                     const cuuint64_t* strides, const cuuint32_t* box,
                                     const char* op, const Tensor& t) {
  const cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  LTX_CHECK(rank >= 1 && rank <= 5, op, ": a TMA map of rank ", rank, " (1 to 5 supported)");
  CUtensorMap map;
  const CUresult r = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<cuuint32_t>(rank), const_cast<void*>(base),
      dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  LTX_CHECK(r == CUDA_SUCCESS, op, ": cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(r),
            ") for ", t.describe());
  return map;
}

}  // namespace ltx::cuda
