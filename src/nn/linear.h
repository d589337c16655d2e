#pragma once
// torch.nn.Linear: y = x W^T + b, weight [out, in] as stored in checkpoints, in one of the storage
// formats of quantization/ (docs/ARCHITECTURE.md, "One way to hold a weight"). Model code calls
// the layer (or gelu_tanh) and never multiplies by `weight` itself, so every format stays correct
// wherever the layer is used.
#include <functional>
#include <string>

#include "core/ggml_type.h"
#include "core/tensor.h"
#include "io/weights.h"
#include "op_types/ggml_linear.h"
#include "nn/module.h"

namespace ltx::nn {

enum class LinearFormat {
  Dense,    // weight and bias in the compute dtype
  Fp8Cast,  // weight float8_e4m3fn, upcast to the input's dtype at each forward: under
            // --quantization fp8-cast the bias too (the reference's Fp8CastLinear;
            // quantization/fp8_cast.h); a file's FP8 weight kept as stored
            // (LoadOptions::keep_fp8_linears) times its weight_scale, bias dense
  Fp8Scaled,    // weight float8_e4m3fn, f32 scalar weight_scale and input_scale, bias in the
                // compute dtype: ops::linear_fp8_scaled (the reference's FP8Linear)
  Fp8PerToken,  // weight float8_e4m3fn with a per-tensor weight_scale, bias in the compute dtype,
                // activations scaled per token: ops::linear_fp8_per_token (--quantization fp8)
  Nvfp4,        // weight packed E2M1 u8 [out, in/2] with block_scales and tensor_scale
                // (op_types/nvfp4.h), dequantised to the input's dtype at each forward; bias dense
                // (quantization/nvfp4.h)
  Fp8Blockwise,  // weight float8_e4m3fn with an f32 weight_scale per 128 x 128 tile, bias in the
                 // compute dtype: ops::linear_fp8_blockwise (quantization/fp8_blockwise.h)
  GgmlBlocks,    // weight: a GGUF file's rows of GGML blocks, u8 [out, bytes per row] of
                 // `ggml_type`, multiplied by ops::linear_ggml (a group of rows dequantised at a
                 // time); bias in the compute dtype. LoRAs add a low-rank term (lora_a, lora_b).
};

// The names under which a LoRA's low-rank term for a GGML layer is bound (lora::Fuser adds them to
// the weight map before the model binds it): "<layer>" + suffix.
inline constexpr const char* kLoraDownSuffix = ".lora_A.weight";  // [rank, in]
inline constexpr const char* kLoraUpSuffix = ".lora_B.weight";    // [out, rank], strengths folded in

struct Linear {
  Tensor weight;  // [out, in]
  Tensor bias;    // [out], or undefined when the layer has none
  // f32 scalar (Fp8Scaled, Fp8PerToken, a kept file weight's Fp8Cast), f32 [out/128, in/128]
  // (Fp8Blockwise), else undefined
  Tensor weight_scale;
  // f32 scalar: the activation scale (Fp8Scaled), or an Nvfp4 file's input_scale (kept for the
  // record; Hopper's GEMM does not use it); else undefined
  Tensor input_scale;
  // Last, so that {weight, bias} still makes a dense layer.
  LinearFormat format = LinearFormat::Dense;
  // Nvfp4 only: the E4M3 block scales and the f32 per-tensor decode scale.
  Tensor block_scales;
  Tensor tensor_scale;
  // GgmlBlocks only: the blocks' type, and the dtype the layer was loaded for (its bias's, and
  // the activations' it multiplies).
  GgmlType ggml_type = GgmlType::F32;
  DType compute = DType::F32;
  // A low-rank term added to the output, y += (x lora_a^T) lora_b^T, in the compute dtype:
  // how LoRAs apply to weights that are not fused (a GGUF file's blocks); undefined otherwise.
  Tensor lora_a;  // [rank, in]
  Tensor lora_b;  // [out, rank]

  // Binds `<name>.weight` (and `<name>.bias` when `has_bias`) from `w`, in the format that
  // opt.quantization's policy gives the layer's full name (w.prefix() + name).
  static Linear load(io::WeightMap& w, const std::string& name, int64_t in_features,
                     int64_t out_features, bool has_bias, const LoadOptions& opt);

  int64_t in_features() const;
  int64_t out_features() const { return weight.size(0); }
  // The dtype of the layer's inputs and outputs: the dense weight's, or the compute dtype the
  // layer was loaded for where the weight is stored otherwise (GgmlBlocks).
  DType dtype() const { return format == LinearFormat::GgmlBlocks ? compute : weight.dtype(); }
  // GgmlBlocks: the weight as ops::linear_ggml takes it.
  ops::GgmlWeight ggml_weight() const { return {weight, ggml_type, in_features()}; }
  Tensor operator()(const Tensor& x) const;
  // gelu_tanh(x W^T + b), one fused op (ops::linear_gelu_tanh) in every format.
  Tensor gelu_tanh(const Tensor& x) const;

  // The weight / bias as a dense tensor of `dtype` (a view for Dense in that dtype, else a new
  // tensor; a low-rank LoRA term is not included); the bias is undefined when the layer has none.
  Tensor dense_weight(DType dtype) const;
  Tensor dense_bias(DType dtype) const;

  // Every parameter tensor the layer holds, each once, with its role as the file names it
  // ("weight", "bias", "weight_scale", "input_scale", and for Nvfp4 "weight_scale" for the block
  // scales and "weight_scale_2" for the decode scale; the scales only where the format has them;
  // "lora_A" and "lora_B" for a low-rank term),
  // in a fixed order (e.g. for moving a block's weights between devices).
  void for_each_parameter(const std::function<void(const char* role, Tensor& t)>& fn);
  void for_each_parameter(const std::function<void(const char* role, const Tensor& t)>& fn) const;

 private:
  // x W^T + b in the layer's format, without the low-rank term.
  Tensor product(const Tensor& x) const;
};

}  // namespace ltx::nn
