#pragma once
// torch.nn.Linear: y = x W^T + b, weight [out, in] as stored in checkpoints, in one of the storage
// formats of quantization/ (docs/ARCHITECTURE.md, "One way to hold a weight"). Model code calls
// the layer (or gelu_tanh) and never multiplies by `weight` itself, so every format stays correct
// wherever the layer is used.
#include <functional>
#include <string>

#include "core/tensor.h"
#include "io/weights.h"
#include "nn/module.h"

namespace ltx::nn {

enum class LinearFormat {
  Dense,    // weight and bias in the compute dtype
  Fp8Cast,  // weight and bias float8_e4m3fn, upcast to the input's dtype at each forward
            // (the reference's Fp8CastLinear; quantization/fp8_cast.h)
  Fp8Scaled,    // weight float8_e4m3fn, f32 scalar weight_scale and input_scale, bias in the
                // compute dtype: ops::linear_fp8_scaled (the reference's FP8Linear)
  Fp8PerToken,  // weight float8_e4m3fn with a per-tensor weight_scale, bias in the compute dtype,
                // activations scaled per token: ops::linear_fp8_per_token (--quantization fp8)
  Nvfp4,        // weight packed E2M1 u8 [out, in/2] with block_scales and tensor_scale
                // (op_types/nvfp4.h), dequantised to the input's dtype at each forward; bias dense
                // (quantization/nvfp4.h)
  Fp8Blockwise,  // weight float8_e4m3fn with an f32 weight_scale per 128 x 128 tile, bias in the
                 // compute dtype: ops::linear_fp8_blockwise (quantization/fp8_blockwise.h)
};

struct Linear {
  Tensor weight;  // [out, in]
  Tensor bias;    // [out], or undefined when the layer has none
  // f32 scalar (Fp8Scaled, Fp8PerToken), f32 [out/128, in/128] (Fp8Blockwise), else undefined
  Tensor weight_scale;
  // f32 scalar: the activation scale (Fp8Scaled), or an Nvfp4 file's input_scale (kept for the
  // record; Hopper's GEMM does not use it); else undefined
  Tensor input_scale;
  // Last, so that {weight, bias} still makes a dense layer.
  LinearFormat format = LinearFormat::Dense;
  // Nvfp4 only: the E4M3 block scales and the f32 per-tensor decode scale.
  Tensor block_scales;
  Tensor tensor_scale;

  // Binds `<name>.weight` (and `<name>.bias` when `has_bias`) from `w`, in the format that
  // opt.quantization's policy gives the layer's full name (w.prefix() + name).
  static Linear load(io::WeightMap& w, const std::string& name, int64_t in_features,
                     int64_t out_features, bool has_bias, const LoadOptions& opt);

  int64_t in_features() const {
    return format == LinearFormat::Nvfp4 ? weight.size(1) * 2 : weight.size(1);
  }
  int64_t out_features() const { return weight.size(0); }
  Tensor operator()(const Tensor& x) const;
  // gelu_tanh(x W^T + b), one fused op (ops::linear_gelu_tanh) in every format.
  Tensor gelu_tanh(const Tensor& x) const;

  // The weight / bias as a dense tensor of `dtype` (a view for Dense in that dtype, else a new
  // tensor); the bias is undefined when the layer has none.
  Tensor dense_weight(DType dtype) const;
  Tensor dense_bias(DType dtype) const;

  // Every parameter tensor the layer holds, each once, with its role as the file names it
  // ("weight", "bias", "weight_scale", "input_scale", and for Nvfp4 "weight_scale" for the block
  // scales and "weight_scale_2" for the decode scale; the scales only where the format has them),
  // in a fixed order (e.g. for moving a block's weights between devices).
  void for_each_parameter(const std::function<void(const char* role, Tensor& t)>& fn);
  void for_each_parameter(const std::function<void(const char* role, const Tensor& t)>& fn) const;
};

}  // namespace ltx::nn
