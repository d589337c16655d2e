#pragma once
// FeedForward (reference: model/transformer/feed_forward.py, gelu_approx.py):
// net.0.proj (dim -> 4 dim) -> GELU(tanh) -> net.2 (4 dim -> dim_out); 2.5's video FFN has no
// biases (ff_bias = false).
#include "nn/linear.h"

namespace ltx::models::transformer {

struct FeedForward {
  nn::Linear proj_in;   // net.0.proj
  nn::Linear proj_out;  // net.2
  static constexpr int64_t kMult = 4;
  static FeedForward load(io::WeightMap& w, int64_t dim, int64_t dim_out, bool bias,
                          const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

}  // namespace ltx::models::transformer
