#include "ops/quantized_linear.h"

#include <cmath>
#include <string>

#include "backend/cpu/quantized_linear.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#if LTX_WITH_CUDA
#include "backend/cuda/quantized_linear.h"
#endif

namespace ltx::ops {

namespace {

// A scale's shape and dtype (its value is checked by check_fp8_scale).
void check_scale_tensor(const char* op, const char* arg, const Tensor& s) {
  LTX_CHECK(s.dtype() == DType::F32 && s.numel() == 1 && s.dim() <= 1, op, ": ", arg,
            " must be an f32 tensor with one element (0-d or [1]), got ", s.describe(),
            " (FP8 checkpoints store per-tensor scales as f32 scalars)");
}

void check_activation_dtype(const char* op, const Tensor& x) {
  LTX_CHECK(x.dtype() == DType::BF16 || x.dtype() == DType::F32, op,
            ": x must be bf16 or f32 (its dtype is the output's), got ", x.describe());
}

// The GEMM sizes for the op profiler: rows x in -> out.
[[maybe_unused]] std::string gemm_detail(const Tensor& x, const Tensor& weight) {
  return std::to_string(x.numel() / x.size(-1)) + "x" + std::to_string(weight.size(1)) + "->" +
         std::to_string(weight.size(0)) + " fp8";
}

}  // namespace

void check_fp8_scale(const Tensor& scale, const std::string& what) {
  LTX_CHECK(scale.defined(), "FP8 scale ", what, " is missing");
  LTX_CHECK(scale.dtype() == DType::F32 && scale.numel() == 1 && scale.dim() <= 1, "FP8 scale ",
            what, " must be an f32 tensor with one element (0-d or [1]), got ", scale.describe());
  const double v = scale.item();
  LTX_CHECK(std::isfinite(v) && v > 0.0, "FP8 scale ", what, " is ", v,
            "; per-tensor scales must be finite and > 0 (re-export the checkpoint, or use "
            "--quantization fp8-cast on its bf16 original)");
}

Tensor quantize_fp8(const Tensor& x, const Tensor& input_scale) {
  check_defined("quantize_fp8", {&x, &input_scale});
  check_activation_dtype("quantize_fp8", x);
  check_scale_tensor("quantize_fp8", "input_scale", input_scale);
  switch (common_device("quantize_fp8", {&x, &input_scale}).type) {
    case DeviceType::CPU:
      check_fp8_scale(input_scale, "input_scale of quantize_fp8");
      return cpu::quantize_e4m3(x, input_scale, Fp8ScaleUse::Divide);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::quantize_e4m3(x, input_scale, Fp8ScaleUse::Divide),
                        "quantize_fp8");
  }
  unreachable_device("quantize_fp8");
}

namespace {

// The FP8 linears' common checks (all but input_scale); returns the common device.
Device check_fp8_linear(const char* op, const Tensor& x, const Tensor& weight,
                        const Tensor& weight_scale, const Tensor& input_scale, const Tensor& bias) {
  check_defined(op, {&x, &weight, &weight_scale});
  LTX_CHECK(x.dim() >= 1, op, ": x must have at least 1 dim, got ", x.describe());
  check_activation_dtype(op, x);
  check_dim(op, "weight", weight, 2);
  LTX_CHECK(weight.dtype() == DType::F8E4M3FN, op, ": weight must be float8_e4m3fn, got ",
            weight.describe(), " (quantize a bf16/f32 weight with quantize_fp8_per_tensor, or "
            "use --quantization fp8-cast for a bf16 checkpoint)");
  LTX_CHECK(weight.size(1) == x.size(-1), op, ": weight ", weight.describe(), " expects ",
            weight.size(1), " input features but x ", x.describe(), " has ", x.size(-1),
            " (weight is [out, in], torch layout)");
  check_scale_tensor(op, "weight_scale", weight_scale);
  if (bias.defined()) {
    LTX_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, ": bias ", bias.describe(),
              " must be [", weight.size(0), "] to match weight ", weight.describe());
    LTX_CHECK(bias.dtype() == DType::BF16 || bias.dtype() == DType::F32, op,
              ": bias must be bf16 or f32, got ", bias.describe());
  }
  return common_device(op, {&x, &weight, &weight_scale, &input_scale, &bias});
}

}  // namespace

Tensor linear_fp8_scaled(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                         const Tensor& input_scale, const Tensor& bias) {
  const char* op = "linear_fp8_scaled";
  check_defined(op, {&input_scale});
  check_scale_tensor(op, "input_scale", input_scale);
  switch (check_fp8_linear(op, x, weight, weight_scale, input_scale, bias).type) {
    case DeviceType::CPU:
      check_fp8_scale(weight_scale, "weight_scale of linear_fp8_scaled");
      check_fp8_scale(input_scale, "input_scale of linear_fp8_scaled");
      return cpu::linear_fp8_scaled(x, weight, weight_scale, input_scale, bias);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH_DETAIL(
          return cuda::linear_fp8_scaled(x, weight, weight_scale, input_scale, bias), op,
          gemm_detail(x, weight));
  }
  unreachable_device(op);
}

Fp8PerToken quantize_fp8_per_token(const Tensor& x) {
  const char* op = "quantize_fp8_per_token";
  check_defined(op, {&x});
  LTX_CHECK(x.dim() >= 1, op, ": x must have at least 1 dim, got ", x.describe());
  check_activation_dtype(op, x);
  switch (x.device().type) {
    case DeviceType::CPU:
      return cpu::quantize_e4m3_per_row(x);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(return cuda::quantize_e4m3_per_row(x), op);
  }
  unreachable_device(op);
}

Tensor linear_fp8_per_token(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias) {
  const char* op = "linear_fp8_per_token";
  switch (check_fp8_linear(op, x, weight, weight_scale, Tensor(), bias).type) {
    case DeviceType::CPU:
      check_fp8_scale(weight_scale, "weight_scale of linear_fp8_per_token");
      return cpu::linear_fp8_per_token(x, weight, weight_scale, bias);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH_DETAIL(return cuda::linear_fp8_per_token(x, weight, weight_scale, bias),
                               op, gemm_detail(x, weight));
  }
  unreachable_device(op);
}

Fp8PerTensor quantize_fp8_per_tensor(const Tensor& weight) {
  check_defined("quantize_fp8_per_tensor", {&weight});
  LTX_CHECK(dtype_is_floating(weight.dtype()), "quantize_fp8_per_tensor: weight must be a float "
            "tensor, got ", weight.describe());
  LTX_CHECK(weight.numel() > 0, "quantize_fp8_per_tensor: weight ", weight.describe(),
            " is empty");
  const Tensor w32 = weight.to(DType::F32);
  // NaN propagates through amax, so one finite check covers NaN and inf elements.
  const double amax = ops::amax(ops::abs(w32)).item();
  LTX_CHECK(std::isfinite(amax), "quantize_fp8_per_tensor: weight ", weight.describe(),
            " holds NaN or inf; it cannot be quantized to FP8 (check the checkpoint, or the "
            "LoRA fused into it)");
  LTX_CHECK(amax > 0.0, "quantize_fp8_per_tensor: weight ", weight.describe(),
            " is all zeros; a per-tensor FP8 scale (448 / amax) does not exist for it (keep the "
            "layer in bf16)");
  // f32 arithmetic, as torch does on the f32 copy of the weight; `448 / amax_tensor` is
  // torch's Tensor.__rtruediv__, which computes reciprocal(amax) * 448 (two roundings).
  const float scale = (1.0f / static_cast<float>(amax)) * kE4m3Max;
  const Device dev = weight.device();
  const Tensor scale_t = Tensor::full({}, static_cast<double>(scale), DType::F32, dev);
  Fp8PerTensor out;
  out.weight_scale = Tensor::full({}, static_cast<double>(1.0f / scale), DType::F32, dev);
  switch (dev.type) {
    case DeviceType::CPU:
      out.weight = cpu::quantize_e4m3(w32, scale_t, Fp8ScaleUse::Multiply);
      return out;
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(out.weight = cuda::quantize_e4m3(w32, scale_t, Fp8ScaleUse::Multiply);
                        return out, "quantize_fp8_per_tensor");
  }
  unreachable_device("quantize_fp8_per_tensor");
}

Fp8PerTensor fuse_delta_fp8_per_tensor(const Tensor& weight, const Tensor& weight_scale,
                                       const Tensor& delta) {
  const char* op = "fuse_delta_fp8_per_tensor";
  check_defined(op, {&weight, &weight_scale, &delta});
  LTX_CHECK(weight.dtype() == DType::F8E4M3FN, op, ": weight must be float8_e4m3fn, got ",
            weight.describe());
  check_scale_tensor(op, "weight_scale", weight_scale);
  LTX_CHECK(dtype_is_floating(delta.dtype()) && delta.shape() == weight.shape(), op, ": delta ",
            delta.describe(), " must be a float tensor of the weight's shape ", weight.describe());
  (void)common_device(op, {&weight, &weight_scale, &delta});
  // f32 throughout, as the reference: weight.to(f32) * weight_scale + delta.to(f32).
  const Tensor dequantized = mul(weight.to(DType::F32), weight_scale);
  return quantize_fp8_per_tensor(add(dequantized, delta.to(DType::F32)));
}

}  // namespace ltx::ops
