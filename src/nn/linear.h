#pragma once
// torch.nn.Linear: y = x W^T + b, weight [out, in] as stored in checkpoints.
#include <string>

#include "core/tensor.h"
#include "io/weights.h"
#include "nn/module.h"

namespace ltx::nn {

struct Linear {
  Tensor weight;  // [out, in]
  Tensor bias;    // [out], or undefined when the layer has none

  // Binds `<name>.weight` (and `<name>.bias` when `has_bias`) from `w`.
  static Linear load(io::WeightMap& w, const std::string& name, int64_t in_features,
                     int64_t out_features, bool has_bias, const LoadOptions& opt);

  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }
  Tensor operator()(const Tensor& x) const;
};

}  // namespace ltx::nn
