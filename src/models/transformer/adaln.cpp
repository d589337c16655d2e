#include "models/transformer/adaln.h"

#include "ops/elementwise.h"

namespace ltx::models::transformer {

AdaLayerNormSingle AdaLayerNormSingle::load(io::WeightMap& w, int64_t embedding_dim,
                                            int64_t embedding_coefficient,
                                            const nn::LoadOptions& opt) {
  AdaLayerNormSingle a;
  a.dim = embedding_dim;
  a.coefficient = embedding_coefficient;
  io::WeightMap e = w.scoped("emb.");
  a.emb = PixArtAlphaCombinedTimestepSizeEmbeddings::load(e, embedding_dim, opt);
  a.linear = nn::Linear::load(w, "linear", embedding_dim, embedding_coefficient * embedding_dim,
                              true, opt);
  return a;
}

std::pair<Tensor, Tensor> AdaLayerNormSingle::operator()(const Tensor& timestep) const {
  Tensor embedded = emb(timestep);
  return {linear(ops::silu(embedded)), embedded};
}

}  // namespace ltx::models::transformer
