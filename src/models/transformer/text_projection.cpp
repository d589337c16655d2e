#include "models/transformer/text_projection.h"

#include "ops/elementwise.h"

namespace ltx::models::transformer {

PixArtAlphaTextProjection PixArtAlphaTextProjection::load(io::WeightMap& w, int64_t in_features,
                                                          int64_t hidden_size,
                                                          const nn::LoadOptions& opt) {
  PixArtAlphaTextProjection p;
  p.linear_1 = nn::Linear::load(w, "linear_1", in_features, hidden_size, true, opt);
  p.linear_2 = nn::Linear::load(w, "linear_2", hidden_size, hidden_size, true, opt);
  return p;
}

Tensor PixArtAlphaTextProjection::operator()(const Tensor& caption) const {
  return linear_2(ops::gelu_tanh(linear_1(caption)));
}

}  // namespace ltx::models::transformer
