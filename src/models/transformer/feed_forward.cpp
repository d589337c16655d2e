#include "models/transformer/feed_forward.h"

#include "ops/linalg.h"

namespace ltx::models::transformer {

FeedForward FeedForward::load(io::WeightMap& w, int64_t dim, int64_t dim_out, bool bias,
                              const nn::LoadOptions& opt) {
  FeedForward f;
  f.proj_in = nn::Linear::load(w, "net.0.proj", dim, dim * kMult, bias, opt);
  f.proj_out = nn::Linear::load(w, "net.2", dim * kMult, dim_out, bias, opt);
  return f;
}

Tensor FeedForward::operator()(const Tensor& x) const {
  // proj_in and its GELU in one GEMM on CUDA with bf16 weights (ops::linear_gelu_tanh).
  return proj_out(proj_in.gelu_tanh(x));
}

}  // namespace ltx::models::transformer
