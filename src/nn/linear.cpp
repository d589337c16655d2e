#include "nn/linear.h"

#include "core/error.h"
#include "ops/linalg.h"
#include "ops/nvfp4.h"
#include "quantization/fp8_cast.h"
#include "quantization/nvfp4.h"

namespace ltx::nn {

namespace {

LinearFormat format_for(const std::string& full_name, quantization::Mode mode) {
  switch (mode) {
    case quantization::Mode::None: return LinearFormat::Dense;
    case quantization::Mode::Fp8Cast:
      return quantization::is_fp8_cast_linear(full_name) ? LinearFormat::Fp8Cast
                                                         : LinearFormat::Dense;
    case quantization::Mode::Nvfp4Cast:
      return quantization::is_nvfp4_cast_linear(full_name) ? LinearFormat::Nvfp4
                                                           : LinearFormat::Dense;
    // The file says which layers are NVFP4 (Linear::load).
    case quantization::Mode::Nvfp4Prequant: return LinearFormat::Dense;
  }
  return LinearFormat::Dense;
}

DType stored_dtype(LinearFormat format, DType compute) {
  return format == LinearFormat::Fp8Cast ? DType::F8E4M3FN : compute;
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
  l.format = format_for(w.prefix() + name, opt.quantization);
  if (l.format == LinearFormat::Nvfp4) {
    ops::Nvfp4Weight q = quantization::take_cast_nvfp4(w, name, in_features, out_features, opt.device);
    l.weight = q.packed;
    l.block_scales = q.block_scales;
    l.tensor_scale = q.tensor_scale;
    if (has_bias) l.bias = w.take(name + ".bias", {out_features}, opt.dtype, opt.device);
    return l;
  }
  const DType dtype = stored_dtype(l.format, opt.dtype);
  l.weight = w.take(name + ".weight", {out_features, in_features}, dtype, opt.device);
  if (has_bias) l.bias = w.take(name + ".bias", {out_features}, dtype, opt.device);
  return l;
}

Tensor Linear::dense_weight(DType dtype) const {
  if (format == LinearFormat::Nvfp4)
    return ops::dequantize_nvfp4({weight, block_scales, tensor_scale}, dtype);
  return weight.to(dtype);
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
  }
  return Tensor();
}

Tensor Linear::gelu_tanh(const Tensor& x) const {
  switch (format) {
    case LinearFormat::Dense: return ops::linear_gelu_tanh(x, weight, bias);
    case LinearFormat::Fp8Cast:
    case LinearFormat::Nvfp4:
      return ops::linear_gelu_tanh(x, dense_weight(x.dtype()), dense_bias(x.dtype()));
  }
  return Tensor();
}

void Linear::for_each_parameter(const std::function<void(const char*, Tensor&)>& fn) {
  fn("weight", weight);
  if (bias.defined()) fn("bias", bias);
  if (block_scales.defined()) fn("weight_scale", block_scales);
  if (tensor_scale.defined()) fn("weight_scale_2", tensor_scale);
  if (input_scale.defined()) fn("input_scale", input_scale);
}

void Linear::for_each_parameter(const std::function<void(const char*, const Tensor&)>& fn) const {
  fn("weight", weight);
  if (bias.defined()) fn("bias", bias);
  if (block_scales.defined()) fn("weight_scale", block_scales);
  if (tensor_scale.defined()) fn("weight_scale_2", tensor_scale);
  if (input_scale.defined()) fn("input_scale", input_scale);
}

}  // namespace ltx::nn
