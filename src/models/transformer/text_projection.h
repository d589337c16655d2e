#pragma once
// PixArtAlphaTextProjection (reference: model/transformer/text_projection.py): the 19B caption
// projection inside the transformer, linear_1 -> GELU(tanh) -> linear_2.
#include "nn/linear.h"

namespace ltx::models::transformer {

struct PixArtAlphaTextProjection {
  nn::Linear linear_1, linear_2;
  // Binds `linear_1.*` [hidden, in] and `linear_2.*` [out, hidden] (out = hidden here).
  static PixArtAlphaTextProjection load(io::WeightMap& w, int64_t in_features, int64_t hidden_size,
                                        const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& caption) const;
};

}  // namespace ltx::models::transformer
