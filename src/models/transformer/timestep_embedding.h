#pragma once
// Timestep embeddings (reference: model/transformer/timestep_embedding.py). Also used by the
// timestep-conditioned video VAE decoder and the diffusion decoder, as in the reference.
#include "nn/linear.h"

namespace ltx::models::transformer {

// Sinusoidal embedding of 1-D timesteps [N] -> [N, dim], computed in f32 like the reference's
// get_timestep_embedding: freq_j = exp(-ln(max_period) * j / (half - downscale_freq_shift)),
// [sin(t f), cos(t f)] (swapped to [cos, sin] with flip_sin_to_cos), zero-padded when dim is odd.
Tensor timestep_sinusoid(const Tensor& timesteps, int64_t dim, bool flip_sin_to_cos,
                         double downscale_freq_shift, double scale = 1.0,
                         double max_period = 10000.0);

// linear_1 -> SiLU -> linear_2.
struct TimestepEmbedding {
  nn::Linear linear_1, linear_2;
  static TimestepEmbedding load(io::WeightMap& w, int64_t in_channels, int64_t time_embed_dim,
                                const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

// PixArt-alpha combined embedding as LTX uses it: 256-channel sinusoid (flip_sin_to_cos, shift 0)
// then `timestep_embedder`. The sinusoid is cast to the parameter dtype before the MLP.
struct PixArtAlphaCombinedTimestepSizeEmbeddings {
  TimestepEmbedding timestep_embedder;
  static constexpr int64_t kChannels = 256;
  static PixArtAlphaCombinedTimestepSizeEmbeddings load(io::WeightMap& w, int64_t embedding_dim,
                                                        const nn::LoadOptions& opt);
  // timesteps [N] f32 -> [N, embedding_dim]
  Tensor operator()(const Tensor& timesteps) const;
};

}  // namespace ltx::models::transformer
