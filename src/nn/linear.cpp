#include "nn/linear.h"

#include "ops/linalg.h"
#include "quantization/fp8_cast.h"

namespace ltx::nn {

namespace {

LinearFormat format_for(const std::string& full_name, quantization::Mode mode) {
  switch (mode) {
    case quantization::Mode::None: return LinearFormat::Dense;
    case quantization::Mode::Fp8Cast:
      return quantization::is_fp8_cast_linear(full_name) ? LinearFormat::Fp8Cast
                                                         : LinearFormat::Dense;
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
  l.format = format_for(w.prefix() + name, opt.quantization);
  const DType dtype = stored_dtype(l.format, opt.dtype);
  l.weight = w.take(name + ".weight", {out_features, in_features}, dtype, opt.device);
  if (has_bias) l.bias = w.take(name + ".bias", {out_features}, dtype, opt.device);
  return l;
}

Tensor Linear::dense_weight(DType dtype) const { return weight.to(dtype); }

Tensor Linear::dense_bias(DType dtype) const {
  return bias.defined() ? bias.to(dtype) : Tensor();
}

Tensor Linear::operator()(const Tensor& x) const {
  switch (format) {
    case LinearFormat::Dense: return ops::linear(x, weight, bias);
    case LinearFormat::Fp8Cast:
      return ops::linear(x, dense_weight(x.dtype()), dense_bias(x.dtype()));
  }
  return Tensor();
}

Tensor Linear::gelu_tanh(const Tensor& x) const {
  switch (format) {
    case LinearFormat::Dense: return ops::linear_gelu_tanh(x, weight, bias);
    case LinearFormat::Fp8Cast:
      return ops::linear_gelu_tanh(x, dense_weight(x.dtype()), dense_bias(x.dtype()));
  }
  return Tensor();
}

void Linear::for_each_parameter(const std::function<void(const char*, Tensor&)>& fn) {
  fn("weight", weight);
  if (bias.defined()) fn("bias", bias);
}

void Linear::for_each_parameter(const std::function<void(const char*, const Tensor&)>& fn) const {
  fn("weight", weight);
  if (bias.defined()) fn("bias", bias);
}

}  // namespace ltx::nn
