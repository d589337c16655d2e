#include "ops/nvfp4.h"

#include <string>

#include "backend/cpu/nvfp4.h"
#include "ops/dispatch.h"
#if LTX_WITH_CUDA
#include "backend/cuda/nvfp4.h"
#endif

namespace ltx::ops {

void check_nvfp4_weight(const Nvfp4Weight& w, int64_t out, int64_t in, const std::string& what) {
  LTX_CHECK(in % kNvfp4BlockSize == 0, what, ": NVFP4 needs in_features to be a multiple of ",
            kNvfp4BlockSize, " (one E4M3 scale per 16 elements), got ", in);
  LTX_CHECK(w.packed.defined() && w.packed.dtype() == DType::U8 &&
                w.packed.shape() == Shape({out, in / 2}),
            what, ": the NVFP4 weight must be u8 [", out, ", ", in / 2,
            "] (two E2M1 values a byte), got ",
            w.packed.defined() ? w.packed.describe() : std::string("none"));
  const Shape scales = nvfp4_block_scales_shape(out, in);
  LTX_CHECK(w.block_scales.defined() && w.block_scales.dtype() == DType::F8E4M3FN &&
                w.block_scales.shape() == scales,
            what, ".weight_scale must be float8_e4m3fn ", scales.str(),
            " (one scale per 16 inputs, padded to cuBLAS's 128x4 tiles), got ",
            w.block_scales.defined() ? w.block_scales.describe() : std::string("none"));
  LTX_CHECK(w.tensor_scale.defined() && w.tensor_scale.dtype() == DType::F32 &&
                w.tensor_scale.numel() == 1 && w.tensor_scale.dim() <= 1,
            what, ".weight_scale_2 must be an f32 scalar, got ",
            w.tensor_scale.defined() ? w.tensor_scale.describe() : std::string("none"));
}

Nvfp4Weight quantize_nvfp4(const Tensor& weight) {
  const char* op = "quantize_nvfp4";
  check_defined(op, {&weight});
  check_dim(op, "weight", weight, 2);
  LTX_CHECK(weight.dtype() == DType::BF16 || weight.dtype() == DType::F32, op,
            ": weight must be bf16 or f32, got ", weight.describe());
  LTX_CHECK(weight.size(1) % kNvfp4BlockSize == 0, op, ": weight ", weight.describe(),
            " has ", weight.size(1), " input features; NVFP4 needs a multiple of ",
            kNvfp4BlockSize, " (keep this layer dense)");
  switch (weight.device().type) {
    case DeviceType::CPU: return cpu::quantize_nvfp4(weight.to(DType::F32).contiguous());
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::quantize_nvfp4(weight), op);
  }
  unreachable_device(op);
}

Tensor dequantize_nvfp4(const Nvfp4Weight& w, DType dtype) {
  const char* op = "dequantize_nvfp4";
  check_defined(op, {&w.packed, &w.block_scales, &w.tensor_scale});
  check_dim(op, "packed", w.packed, 2);
  check_nvfp4_weight(w, w.packed.size(0), w.packed.size(1) * 2, op);
  LTX_CHECK(dtype == DType::BF16 || dtype == DType::F32, op, ": dtype must be bf16 or f32, got ",
            dtype_name(dtype));
  switch (common_device(op, {&w.packed, &w.block_scales, &w.tensor_scale}).type) {
    case DeviceType::CPU: return cpu::dequantize_nvfp4(w, dtype);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::dequantize_nvfp4(w, dtype), op);
  }
  unreachable_device(op);
}

}  // namespace ltx::ops
