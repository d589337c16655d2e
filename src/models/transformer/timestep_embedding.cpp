#include "models/transformer/timestep_embedding.h"

#include <cmath>

#include "ops/elementwise.h"

namespace ltx::models::transformer {

Tensor timestep_sinusoid(const Tensor& timesteps, int64_t dim, bool flip_sin_to_cos,
                         double downscale_freq_shift, double scale, double max_period) {
  LTX_CHECK(timesteps.dim() == 1, "timestep embedding: timesteps must be 1-D, got ",
            timesteps.describe());
  LTX_CHECK(dim >= 2, "timestep embedding: dim must be >= 2");
  const int64_t n = timesteps.size(0), half = dim / 2;
  const std::vector<float> t = timesteps.to_float_vector();
  // Same f32 steps as the reference: exponent = (-ln(P) * j) / (half - shift); freq = exp(.).
  const float neg_log_p = static_cast<float>(-std::log(max_period));
  const float denom = static_cast<float>(static_cast<double>(half) - downscale_freq_shift);
  std::vector<float> freq(half);
  for (int64_t j = 0; j < half; ++j) {
    const float e = (neg_log_p * static_cast<float>(j)) / denom;
    freq[j] = std::exp(e);
  }
  std::vector<float> out(static_cast<size_t>(n * dim), 0.f);
  const float s = static_cast<float>(scale);
  for (int64_t i = 0; i < n; ++i) {
    float* row = &out[i * dim];
    for (int64_t j = 0; j < half; ++j) {
      const float a = s * (t[i] * freq[j]);
      const float sv = std::sin(a), cv = std::cos(a);
      row[j] = flip_sin_to_cos ? cv : sv;
      row[half + j] = flip_sin_to_cos ? sv : cv;
    }
  }
  return Tensor::from_vector(out, {n, dim}).to(timesteps.device());
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
  return timestep_embedder(proj.to(timestep_embedder.linear_1.weight.dtype()));
}

}  // namespace ltx::models::transformer
