#include "models/transformer/feed_forward.h"

#include "ops/elementwise.h"

namespace ltx::models::transformer {

FeedForward FeedForward::load(io::WeightMap& w, int64_t dim, int64_t dim_out, bool bias,
                              const nn::LoadOptions& opt) {
  FeedForward f;
  f.proj_in = nn::Linear::load(w, "net.0.proj", dim, dim * kMult, bias, opt);
  f.proj_out = nn::Linear::load(w, "net.2", dim * kMult, dim_out, bias, opt);
  return f;
}

Tensor FeedForward::operator()(const Tensor& x) const {
  return proj_out(ops::gelu_tanh(proj_in(x)));
}

}  // namespace ltx::models::transformer
