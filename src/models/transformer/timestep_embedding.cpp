#include "models/transformer/timestep_embedding.h"

#include <cmath>
#include <ios>

#include "core/constant_cache.h"
#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace ltx::models::transformer {

Tensor timestep_sinusoid(const Tensor& timesteps, int64_t dim, bool flip_sin_to_cos,
                         double downscale_freq_shift, double scale, double max_period) {
  LTX_CHECK(timesteps.dim() == 1, "timestep embedding: timesteps must be 1-D, got ",
            timesteps.describe());
  LTX_CHECK(dim >= 2, "timestep embedding: dim must be >= 2");
  const int64_t half = dim / 2;
  // Same f32 steps as the reference: exponent = (-ln(P) * j) / (half - shift); freq = exp(.).
  // The frequency ladder is a constant (made on the host once per device); the rest runs as ops
  // on the timesteps' device, so a GPU step never waits for the host here.
  const Tensor ladder = cached_constant(
      str(std::hexfloat, "timestep_ladder half=", half, " period=", max_period,
          " shift=", downscale_freq_shift),
      timesteps.device(), [&] {
        const float neg_log_p = static_cast<float>(-std::log(max_period));
        const float denom = static_cast<float>(static_cast<double>(half) - downscale_freq_shift);
        std::vector<float> freq(static_cast<size_t>(half));
        for (int64_t j = 0; j < half; ++j) {
          const float e = (neg_log_p * static_cast<float>(j)) / denom;
          freq[static_cast<size_t>(j)] = std::exp(e);
        }
        return Tensor::from_vector(freq, {1, half});
      });
  Tensor a = ops::mul(timesteps.to(DType::F32).unsqueeze(1), ladder);  // t * freq, [n, half]
  if (scale != 1.0) a = ops::mul(a, static_cast<double>(static_cast<float>(scale)));
  const Tensor sv = ops::sin(a), cv = ops::cos(a);
  const Tensor emb = flip_sin_to_cos ? ops::concat({cv, sv}, 1) : ops::concat({sv, cv}, 1);
  // An odd dim gets a zero last column, as the reference pads.
  if (dim % 2 == 0) return emb;
  // A device fill and a copy (ops::pad would upload an index map from the host).
  return ops::concat({emb, Tensor::zeros({emb.size(0), 1}, emb.dtype(), emb.device())}, 1);
}

TimestepEmbedding TimestepEmbedding::load(io::WeightMap& w, int64_t in_channels,
                                          int64_t time_embed_dim, const nn::LoadOptions& opt) {
  TimestepEmbedding e;
  e.linear_1 = nn::Linear::load(w, "linear_1", in_channels, time_embed_dim, true, opt);
  e.linear_2 = nn::Linear::load(w, "linear_2", time_embed_dim, time_embed_dim, true, opt);
  return e;
}

Tensor TimestepEmbedding::operator()(const Tensor& x) const {
  return linear_2(ops::silu(linear_1(x)));
}

PixArtAlphaCombinedTimestepSizeEmbeddings PixArtAlphaCombinedTimestepSizeEmbeddings::load(
    io::WeightMap& w, int64_t embedding_dim, const nn::LoadOptions& opt) {
  PixArtAlphaCombinedTimestepSizeEmbeddings e;
  io::WeightMap s = w.scoped("timestep_embedder.");
  e.timestep_embedder = TimestepEmbedding::load(s, kChannels, embedding_dim, opt);
  return e;
}

Tensor PixArtAlphaCombinedTimestepSizeEmbeddings::operator()(const Tensor& timesteps) const {
  Tensor proj = timestep_sinusoid(timesteps.to(DType::F32), kChannels, true, 0.0);
  return timestep_embedder(proj.to(timestep_embedder.linear_1.dtype()));
}

}  // namespace ltx::models::transformer
