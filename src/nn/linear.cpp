#include "nn/linear.h"

#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/nvfp4.h"
#include "ops/quantized_linear.h"
#include "quantization/fp8_blockwise.h"
#include "quantization/fp8_cast.h"
#include "quantization/nvfp4.h"

namespace ltx::nn {

namespace {

// A pre-quantised FP8 layer of the file: an e4m3 weight with a weight_scale beside it. The
// reference finds these by suffix-matching the file's keys against the model's module names; the
// weight map's key map already made the file's keys the model's names, so a lookup is the match.
bool file_has_fp8_scaled(const io::WeightMap& w, const std::string& name) {
  return w.contains(name + ".weight") && w.dtype(name + ".weight") == DType::F8E4M3FN &&
         w.contains(name + ".weight_scale");
}

LinearFormat format_for(const io::WeightMap& w, const std::string& name, quantization::Mode mode) {
  const std::string full_name = w.prefix() + name;
  switch (mode) {
    case quantization::Mode::None: return LinearFormat::Dense;
    case quantization::Mode::Fp8Cast:
      return quantization::is_fp8_cast_linear(full_name) ? LinearFormat::Fp8Cast
                                                         : LinearFormat::Dense;
    case quantization::Mode::Fp8ScaledMm:
      return file_has_fp8_scaled(w, name) ? LinearFormat::Fp8Scaled : LinearFormat::Dense;
    case quantization::Mode::Fp8:
      // fp8-cast's layers, and any layer the file already stores FP8 with a scale (used as stored
      // rather than widened without its scale).
      return quantization::is_fp8_cast_linear(full_name) || file_has_fp8_scaled(w, name)
                 ? LinearFormat::Fp8PerToken
                 : LinearFormat::Dense;
    case quantization::Mode::Nvfp4Cast:
      return quantization::is_nvfp4_cast_linear(full_name) ? LinearFormat::Nvfp4
                                                           : LinearFormat::Dense;
    // The file says which layers are NVFP4 (Linear::load).
    case quantization::Mode::Nvfp4Prequant: return LinearFormat::Dense;
    case quantization::Mode::Fp8Blockwise:
      return quantization::is_fp8_blockwise_linear(full_name) ||
                     quantization::file_has_fp8_blockwise(w, name)
                 ? LinearFormat::Fp8Blockwise
                 : LinearFormat::Dense;
  }
  return LinearFormat::Dense;
}

Tensor take_scale(io::WeightMap& w, const std::string& name, Device device) {
  Tensor s = w.take_any_shape(name, DType::F32, device);
  if (!s.defined()) return s;  // recorded for finish()
  // The CUDA GEMM never reads a scale back, so a zero / NaN scale is refused here, once.
  ops::check_fp8_scale(s, w.prefix() + name);
  return s;
}

}  // namespace

Linear Linear::load(io::WeightMap& w, const std::string& name, int64_t in_features,
                    int64_t out_features, bool has_bias, const LoadOptions& opt) {
  Linear l;
  if (opt.quantization == quantization::Mode::Nvfp4Prequant) {
    if (auto p = quantization::take_prequant_nvfp4(w, name, in_features, out_features, opt.device)) {
      l.format = LinearFormat::Nvfp4;
      l.weight = p->weight.packed;
      l.block_scales = p->weight.block_scales;
      l.tensor_scale = p->weight.tensor_scale;
      l.input_scale = p->input_scale;
      if (has_bias) l.bias = w.take(name + ".bias", {out_features}, opt.dtype, opt.device);
      return l;
    }
  }
  l.format = format_for(w, name, opt.quantization);
  const Shape weight_shape{out_features, in_features};
  switch (l.format) {
    case LinearFormat::Dense:
    case LinearFormat::Fp8Cast: {
      const DType dtype = l.format == LinearFormat::Fp8Cast ? DType::F8E4M3FN : opt.dtype;
      l.weight = w.take(name + ".weight", weight_shape, dtype, opt.device);
      if (has_bias) l.bias = w.take(name + ".bias", {out_features}, dtype, opt.device);
      return l;
    }
    case LinearFormat::Fp8Scaled:
      l.weight = w.take(name + ".weight", weight_shape, DType::F8E4M3FN, opt.device);
      l.weight_scale = take_scale(w, name + ".weight_scale", opt.device);
      LTX_CHECK(w.contains(name + ".input_scale"), "--quantization fp8-scaled-mm: layer '",
                w.prefix(), name, "' has a weight_scale but no input_scale, which the static FP8 "
                "GEMM needs; use --quantization fp8 (activation scales computed per token)");
      l.input_scale = take_scale(w, name + ".input_scale", opt.device);
      break;
    case LinearFormat::Fp8PerToken:
      if (file_has_fp8_scaled(w, name)) {
        l.weight = w.take(name + ".weight", weight_shape, DType::F8E4M3FN, opt.device);
        l.weight_scale = take_scale(w, name + ".weight_scale", opt.device);
      } else {
        // Quantised here from the weight as the dense model would bind it (the amax and the
        // products are computed in f32 either way).
        const Tensor dense = w.take(name + ".weight", weight_shape, opt.dtype, opt.device);
        if (dense.defined()) {
          const ops::Fp8PerTensor q = ops::quantize_fp8_per_tensor(dense);
          l.weight = q.weight;
          l.weight_scale = q.weight_scale;
        }
      }
      // The activation scale is computed per token; a static one in the file is not used.
      w.ignore(name + ".input_scale");
      break;
    case LinearFormat::Fp8Blockwise:
      if (quantization::file_has_fp8_blockwise(w, name)) {
        l.weight = w.take(name + ".weight", weight_shape, DType::F8E4M3FN, opt.device);
        l.weight_scale = w.take(name + ".weight_scale",
                                {ops::fp8_blocks(out_features), ops::fp8_blocks(in_features)},
                                DType::F32, opt.device);
      } else {
        // Quantised here from the file's values in f32, as the reference does (w.float()).
        const Tensor dense = w.take(name + ".weight", weight_shape, DType::F32, opt.device);
        if (dense.defined()) {
          try {
            ops::Fp8Blockwise q = ops::quantize_fp8_blockwise(dense);
            l.weight = q.weight;
            l.weight_scale = q.weight_scale;
          } catch (const Error& e) {
            fail("--quantization fp8-blockwise: layer '", w.prefix(), name, "': ", e.what());
          }
        }
      }
      // A static activation scale, if the file has one, is not used: groups are scaled per token.
      w.ignore(name + ".input_scale");
      break;
    case LinearFormat::Nvfp4: {
      const ops::Nvfp4Weight q =
          quantization::take_cast_nvfp4(w, name, in_features, out_features, opt.device);
      l.weight = q.packed;
      l.block_scales = q.block_scales;
      l.tensor_scale = q.tensor_scale;
      break;
    }
  }
  if (has_bias) l.bias = w.take(name + ".bias", {out_features}, opt.dtype, opt.device);
  return l;
}

Tensor Linear::dense_weight(DType dtype) const {
  if (format == LinearFormat::Nvfp4)
    return ops::dequantize_nvfp4({weight, block_scales, tensor_scale}, dtype);
  if (format == LinearFormat::Fp8Blockwise)
    return ops::dequantize_fp8_blockwise(weight, weight_scale, dtype);
  if (!weight_scale.defined()) return weight.to(dtype);
  return ops::mul(weight.to(DType::F32), weight_scale).to(dtype);
}

Tensor Linear::dense_bias(DType dtype) const {
  return bias.defined() ? bias.to(dtype) : Tensor();
}

Tensor Linear::operator()(const Tensor& x) const {
  switch (format) {
    case LinearFormat::Dense: return ops::linear(x, weight, bias);
    case LinearFormat::Fp8Cast:
    case LinearFormat::Nvfp4:
      return ops::linear(x, dense_weight(x.dtype()), dense_bias(x.dtype()));
    case LinearFormat::Fp8Scaled:
      return ops::linear_fp8_scaled(x, weight, weight_scale, input_scale, bias);
    case LinearFormat::Fp8PerToken: return ops::linear_fp8_per_token(x, weight, weight_scale, bias);
    case LinearFormat::Fp8Blockwise:
      return ops::linear_fp8_blockwise(x, weight, weight_scale, bias);
  }
  return Tensor();
}

Tensor Linear::gelu_tanh(const Tensor& x) const {
  switch (format) {
    case LinearFormat::Dense: return ops::linear_gelu_tanh(x, weight, bias);
    case LinearFormat::Fp8Cast:
    case LinearFormat::Nvfp4:
      return ops::linear_gelu_tanh(x, dense_weight(x.dtype()), dense_bias(x.dtype()));
    case LinearFormat::Fp8Scaled:
    case LinearFormat::Fp8PerToken:
    case LinearFormat::Fp8Blockwise: return ops::gelu_tanh((*this)(x));
  }
  return Tensor();
}

void Linear::for_each_parameter(const std::function<void(const char*, Tensor&)>& fn) {
  fn("weight", weight);
  if (bias.defined()) fn("bias", bias);
  if (weight_scale.defined()) fn("weight_scale", weight_scale);
  if (block_scales.defined()) fn("weight_scale", block_scales);
  if (tensor_scale.defined()) fn("weight_scale_2", tensor_scale);
  if (input_scale.defined()) fn("input_scale", input_scale);
}

void Linear::for_each_parameter(const std::function<void(const char*, const Tensor&)>& fn) const {
  fn("weight", weight);
  if (bias.defined()) fn("bias", bias);
  if (weight_scale.defined()) fn("weight_scale", weight_scale);
  if (block_scales.defined()) fn("weight_scale", block_scales);
  if (tensor_scale.defined()) fn("weight_scale_2", tensor_scale);
  if (input_scale.defined()) fn("input_scale", input_scale);
}

}  // namespace ltx::nn
