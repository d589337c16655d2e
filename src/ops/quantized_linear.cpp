#include "ops/quantized_linear.h"

#include <cmath>
#include <string>

#include <vector>

#include "backend/cpu/blockwise_fp8.h"
#include "backend/cpu/quantized_linear.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#if LTX_WITH_CUDA
#include "backend/cuda/blockwise_fp8.h"
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
[[maybe_unused]] std::string fp8_gemm_detail(const Tensor& x, const Tensor& weight) {
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
          fp8_gemm_detail(x, weight));
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
                               op, fp8_gemm_detail(x, weight));
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

// ------------------------------------------------------------------------------ blockwise FP8

namespace {

void check_block_scale(const char* op, const Tensor& weight, const Tensor& weight_scale) {
  check_dim(op, "weight", weight, 2);
  LTX_CHECK(weight.dtype() == DType::F8E4M3FN, op, ": weight must be float8_e4m3fn, got ",
            weight.describe());
  const Shape want{fp8_blocks(weight.size(0)), fp8_blocks(weight.size(1))};
  LTX_CHECK(weight_scale.dtype() == DType::F32 && weight_scale.shape() == want, op,
            ": weight_scale must be f32 ", want.str(), " (one scale per 128 x 128 tile of weight ",
            weight.describe(), "), got ", weight_scale.describe());
}

// The tiles' amax read back to the host; throws for a tile the rule cannot quantise.
void check_tile_amax(const Tensor& amax, const Tensor& weight) {
  const std::vector<float> a = amax.to(Device::cpu()).to_float_vector();
  const int64_t cols = amax.size(1);
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i) / cols, c = static_cast<int64_t>(i) % cols;
    LTX_CHECK(std::isfinite(a[i]), "quantize_fp8_blockwise: weight ", weight.describe(),
              " holds NaN or inf in its 128 x 128 tile (", r, ", ", c, ") (rows ", r * kFp8Block,
              "+, columns ", c * kFp8Block, "+); it cannot be quantized to FP8 (check the "
              "checkpoint, or the LoRA fused into it)");
    LTX_CHECK(a[i] > 0.0f, "quantize_fp8_blockwise: weight ", weight.describe(),
              " is all zeros in its 128 x 128 tile (", r, ", ", c, ") (rows ", r * kFp8Block,
              "+, columns ", c * kFp8Block, "+); the tile's scale (448 / amax) does not exist "
              "(keep the layer in bf16)");
  }
}

#if LTX_WITH_CUDA
// linear_fp8_blockwise on CUDA, the arguments checked.
Tensor linear_fp8_blockwise_cuda(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                                 const Tensor& bias) {
  // cuBLASLt reads the tile scales with the input tiles' count padded to a multiple of 4 (each
  // row of scales 16-byte aligned).
  const int64_t kb = weight_scale.size(1);
  const Tensor ws = kb % 4 == 0 ? weight_scale.contiguous()
                                : pad(weight_scale, {0, 4 - kb % 4}).contiguous();
  // The epilogue adds a bias in the output's dtype; any other bias is added to an f32 result,
  // which is then rounded once, as on the CPU.
  const bool epilogue_bias =
      !bias.defined() || (bias.dtype() == DType::BF16 && x.dtype() == DType::BF16);
  if (epilogue_bias)
    return cuda::linear_fp8_blockwise(x, weight.contiguous(), ws,
                                      bias.defined() ? bias.contiguous() : Tensor(), x.dtype());
  const Tensor acc = cuda::linear_fp8_blockwise(x, weight.contiguous(), ws, Tensor(), DType::F32);
  return add(acc, bias.to(DType::F32)).to(x.dtype());
}
#endif

}  // namespace

Fp8Blockwise quantize_fp8_blockwise(const Tensor& weight) {
  const char* op = "quantize_fp8_blockwise";
  check_defined(op, {&weight});
  check_dim(op, "weight", weight, 2);
  LTX_CHECK(dtype_is_floating(weight.dtype()) && weight.dtype() != DType::F8E4M3FN, op,
            ": weight must be a bf16 / f16 / f32 tensor, got ", weight.describe());
  LTX_CHECK(weight.numel() > 0, op, ": weight ", weight.describe(), " is empty");
  const Tensor w32 = weight.to(DType::F32).contiguous();
  switch (weight.device().type) {
    case DeviceType::CPU: {
      const Tensor amax = cpu::tile_amax(w32);
      check_tile_amax(amax, weight);
      return cpu::quantize_e4m3_tiles(w32, amax);
    }
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH(const Tensor amax = cuda::tile_amax(w32); check_tile_amax(amax, weight);
                        return cuda::quantize_e4m3_tiles(w32, amax), op);
  }
  unreachable_device(op);
}

Tensor dequantize_fp8_blockwise(const Tensor& weight, const Tensor& weight_scale, DType dtype) {
  const char* op = "dequantize_fp8_blockwise";
  check_defined(op, {&weight, &weight_scale});
  check_block_scale(op, weight, weight_scale);
  LTX_CHECK(dtype == DType::BF16 || dtype == DType::F32, op, ": dtype must be bf16 or f32, got ",
            dtype_name(dtype));
  const Tensor w = weight.contiguous(), s = weight_scale.contiguous();
  switch (common_device(op, {&weight, &weight_scale}).type) {
    case DeviceType::CPU: return cpu::dequantize_e4m3_tiles(w, s, dtype);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::dequantize_e4m3_tiles(w, s, dtype), op);
  }
  unreachable_device(op);
}

Fp8PerGroup quantize_fp8_per_group(const Tensor& x) {
  const char* op = "quantize_fp8_per_group";
  check_defined(op, {&x});
  LTX_CHECK(x.dim() >= 1, op, ": x must have at least 1 dim, got ", x.describe());
  check_activation_dtype(op, x);
  switch (x.device().type) {
    case DeviceType::CPU: return cpu::quantize_e4m3_groups(x);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::quantize_e4m3_groups(x), op);
  }
  unreachable_device(op);
}

Tensor linear_fp8_blockwise(const Tensor& x, const Tensor& weight, const Tensor& weight_scale,
                            const Tensor& bias) {
  const char* op = "linear_fp8_blockwise";
  check_defined(op, {&x, &weight, &weight_scale});
  LTX_CHECK(x.dim() >= 1, op, ": x must have at least 1 dim, got ", x.describe());
  check_activation_dtype(op, x);
  check_block_scale(op, weight, weight_scale);
  LTX_CHECK(weight.size(1) == x.size(-1), op, ": weight ", weight.describe(), " expects ",
            weight.size(1), " input features but x ", x.describe(), " has ", x.size(-1),
            " (weight is [out, in], torch layout)");
  if (bias.defined()) {
    LTX_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, ": bias ", bias.describe(),
              " must be [", weight.size(0), "] to match weight ", weight.describe());
    LTX_CHECK(bias.dtype() == DType::BF16 || bias.dtype() == DType::F32, op,
              ": bias must be bf16 or f32, got ", bias.describe());
  }
  switch (common_device(op, {&x, &weight, &weight_scale, &bias}).type) {
    case DeviceType::CPU:
      return cpu::linear_fp8_blockwise(x, weight.contiguous(), weight_scale.contiguous(), bias);
    case DeviceType::CUDA:
      LTX_CUDA_DISPATCH_DETAIL(return linear_fp8_blockwise_cuda(x, weight, weight_scale, bias),
                               op, fp8_gemm_detail(x, weight) + " blockwise");
  }
  unreachable_device(op);
}

Fp8Blockwise fuse_delta_fp8_blockwise(const Tensor& weight, const Tensor& weight_scale,
                                      const Tensor& delta) {
  const char* op = "fuse_delta_fp8_blockwise";
  check_defined(op, {&weight, &weight_scale, &delta});
  check_block_scale(op, weight, weight_scale);
  LTX_CHECK(dtype_is_floating(delta.dtype()) && delta.shape() == weight.shape(), op, ": delta ",
            delta.describe(), " must be a float tensor of the weight's shape ", weight.describe());
  (void)common_device(op, {&weight, &weight_scale, &delta});
  // bf16 throughout, as the reference: bf16 dequantisation + delta.to(bf16), the sum rounded
  // to bf16 (computed in f32, as torch's bf16 add).
  const Tensor merged =
      add(dequantize_fp8_blockwise(weight, weight_scale, DType::BF16).to(DType::F32),
          delta.to(DType::BF16).to(DType::F32))
          .to(DType::BF16);
  return quantize_fp8_blockwise(merged);
}

}  // namespace ltx::ops
