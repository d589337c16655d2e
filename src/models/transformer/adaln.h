#pragma once
// AdaLayerNormSingle (reference: model/transformer/adaln.py): timestep -> (Linear(SiLU(emb)), emb)
// with emb the PixArt-alpha timestep embedding.
#include <utility>

#include "models/transformer/timestep_embedding.h"

namespace ltx::models::transformer {

// Rows of a block's AdaLN table: 6 (self-attention + FFN shift/scale/gate), 9 with the text
// cross-attention AdaLN (2.3 / 2.5).
inline int64_t adaln_embedding_coefficient(bool cross_attention_adaln) {
  return cross_attention_adaln ? 9 : 6;
}

struct AdaLayerNormSingle {
  PixArtAlphaCombinedTimestepSizeEmbeddings emb;
  nn::Linear linear;  // [coefficient * dim, dim]
  int64_t dim = 0, coefficient = 0;

  // Binds `emb.timestep_embedder.linear_{1,2}.*` and `linear.*` of `w`.
  static AdaLayerNormSingle load(io::WeightMap& w, int64_t embedding_dim,
                                 int64_t embedding_coefficient, const nn::LoadOptions& opt);
  // timestep [N] (already scaled, e.g. sigma * 1000) -> {[N, coefficient * dim], emb [N, dim]}.
  std::pair<Tensor, Tensor> operator()(const Tensor& timestep) const;
};

}  // namespace ltx::models::transformer
