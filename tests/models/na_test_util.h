#pragma once
// Diffusion-decoder transformer pieces with made-up weights (io::WeightMap::synthetic), for the
// tests of the attention's fused q / k preparation on the CPU (tests/models) and CUDA (tests/cuda).
#include <functional>
#include <string>

#include "io/weights.h"
#include "models/video_vae/transformer/blocks.h"
#include "nn/module.h"
#include "support/test_support.h"

namespace ltx::test {

// Uniform weights in [-0.5, 0.5), norm weights in [0.5, 1.5); a fixed draw per (name, seed).
inline io::WeightMap random_decoder_weights(uint64_t seed) {
  return io::WeightMap::synthetic([seed](const std::string& name, const Shape& shape, DType dtype,
                                         Device device) {
    const uint64_t s = seed ^ std::hash<std::string>{}(name);
    const bool norm = name.find("norm") != std::string::npos;
    return random_tensor(shape, s, norm ? 0.5f : -0.5f, norm ? 1.5f : 0.5f).to(device, dtype);
  });
}

inline models::video_vae::NeighborhoodAttention3D random_na3d(
    int64_t dim, int64_t head_dim, const models::video_vae::Kernel3& kernel,
    const nn::LoadOptions& opt, uint64_t seed) {
  io::WeightMap w = random_decoder_weights(seed);
  return models::video_vae::NeighborhoodAttention3D::load(w, dim, kernel, head_dim, opt);
}

}  // namespace ltx::test
