#include "ops/ggml_linear.h"

#include "backend/cpu/ggml_linear.h"
#include "op_types/ggml_blocks.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#if LTX_WITH_CUDA
#include "backend/cuda/ggml_linear.h"
#endif

namespace ltx::ops {

void check_ggml_weight(const GgmlWeight& w, const std::string& what) {
  LTX_CHECK(w.blocks.defined(), what, ": the GGML weight has no data");
  LTX_CHECK(ggml::has_dequantizer(w.type), what, " is stored as GGML type ", ggml_type_name(w.type),
            ", which ltx cannot compute with (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, "
            "Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K); use a file quantized to one of those types");
  const int64_t elems = ggml::block_elems(w.type), bytes = ggml::block_bytes(w.type);
  LTX_CHECK(w.in_features > 0 && w.in_features % elems == 0, what, ": ", w.in_features,
            " input features are not a whole number of ", ggml_type_name(w.type), " blocks (",
            elems, " values each)");
  const int64_t row_bytes = w.in_features / elems * bytes;
  LTX_CHECK(w.blocks.dtype() == DType::U8 && w.blocks.dim() == 2 &&
                w.blocks.size(1) == row_bytes && w.blocks.is_contiguous(),
            what, ": the ", ggml_type_name(w.type), " weight must be contiguous u8 [out, ",
            row_bytes, "] (", w.in_features, " values a row), got ", w.blocks.describe());
}

namespace {

Device check_linear_ggml(const char* op, const Tensor& x, const GgmlWeight& w, const Tensor& bias) {
  check_defined(op, {&x});
  check_ggml_weight(w, std::string(op) + ": weight");
  LTX_CHECK(x.dim() >= 1 && x.size(-1) == w.in_features, op, ": x ", x.describe(), " has ",
            x.dim() >= 1 ? x.size(-1) : 0, " input features but the weight expects ",
            w.in_features);
  if (bias.defined())
    LTX_CHECK(bias.dim() == 1 && bias.size(0) == w.out_features(), op, ": bias ",
              bias.describe(), " must be [", w.out_features(), "]");
  const Device d = common_device(op, {&x, &w.blocks, &bias});
  if (d.is_cpu()) {
    check_dtype(op, "x", x, DType::F32);
    if (bias.defined()) check_dtype(op, "bias", bias, DType::F32);
  } else {
    LTX_CHECK(x.dtype() == DType::BF16 || x.dtype() == DType::F32, op,
              ": x must be bf16 or f32, got ", x.describe());
    if (bias.defined())
      LTX_CHECK(bias.dtype() == DType::BF16 || bias.dtype() == DType::F32, op,
                ": bias must be bf16 or f32, got ", bias.describe());
  }
  return d;
}

}  // namespace

Tensor linear_ggml(const Tensor& x, const GgmlWeight& w, const Tensor& bias) {
  const char* op = "linear_ggml";
  switch (check_linear_ggml(op, x, w, bias).type) {
    case DeviceType::CPU: return cpu::linear_ggml(x, w, bias);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::linear_ggml(x, w, bias, false), op);
  }
  unreachable_device(op);
}

Tensor linear_ggml_gelu_tanh(const Tensor& x, const GgmlWeight& w, const Tensor& bias) {
#if LTX_WITH_CUDA
  const char* op = "linear_ggml_gelu_tanh";
  // The GELU epilogue takes a bf16 output and no or a bf16 bias (as ops::linear_gelu_tanh).
  if (check_linear_ggml(op, x, w, bias).is_cuda() && x.dtype() == DType::BF16 &&
      (!bias.defined() || bias.dtype() == DType::BF16))
    LTX_CUDA_DISPATCH(return cuda::linear_ggml(x, w, bias, true), op);
#endif
  return gelu_tanh(linear_ggml(x, w, bias));
}

Tensor dequantize_ggml(const GgmlWeight& w, DType dtype) {
  const char* op = "dequantize_ggml";
  check_ggml_weight(w, op);
  LTX_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16, op,
            ": dtype must be f32, bf16 or f16, got ", dtype_name(dtype));
  switch (w.blocks.device().type) {
    case DeviceType::CPU: {
      const Tensor f = cpu::dequantize_ggml(w);
      return dtype == DType::F32 ? f : f.to(dtype);
    }
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::dequantize_ggml(w, 0, w.out_features(), dtype), op);
  }
  unreachable_device(op);
}

}  // namespace ltx::ops
