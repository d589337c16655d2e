#include "nn/linear.h"

#include "ops/linalg.h"

namespace ltx::nn {

Linear Linear::load(io::WeightMap& w, const std::string& name, int64_t in_features,
                    int64_t out_features, bool has_bias, const LoadOptions& opt) {
  Linear l;
  l.weight = w.take(name + ".weight", {out_features, in_features}, opt.dtype, opt.device);
  if (has_bias) l.bias = w.take(name + ".bias", {out_features}, opt.dtype, opt.device);
  return l;
}

Tensor Linear::operator()(const Tensor& x) const { return ops::linear(x, weight, bias); }

}  // namespace ltx::nn
