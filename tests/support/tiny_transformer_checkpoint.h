#pragma once
// A tiny single-file LTX checkpoint for the quantize / convert tests, made in memory: a few
// transformer tensors under "model.diffusion_model." whose Linears are wide enough for the K
// blocks (256), the kinds the GGUF policy tells apart (bias, norm, scale_shift_table, AdaLN,
// patchify / proj_out, learnable registers, to_v, ff.net.2), plus a VAE tensor that a GGUF
// output leaves out; bf16 values ~ N(0, 0.02^2), `config` and `model_version` metadata.
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace ltx::test {

inline const std::vector<std::pair<std::string, Shape>>& tiny_transformer_shapes() {
  static const std::vector<std::pair<std::string, Shape>> shapes = {
      {"model.diffusion_model.adaln_single.linear.weight", Shape{512, 256}},
      {"model.diffusion_model.adaln_single.linear.bias", Shape{512}},
      {"model.diffusion_model.patchify_proj.weight", Shape{256, 128}},
      {"model.diffusion_model.proj_out.weight", Shape{128, 256}},
      {"model.diffusion_model.scale_shift_table", Shape{2, 256}},
      {"model.diffusion_model.transformer_blocks.0.scale_shift_table", Shape{9, 256}},
      {"model.diffusion_model.transformer_blocks.0.attn1.to_q.weight", Shape{256, 256}},
      {"model.diffusion_model.transformer_blocks.0.attn1.to_q.bias", Shape{256}},
      {"model.diffusion_model.transformer_blocks.0.attn1.to_v.weight", Shape{256, 256}},
      {"model.diffusion_model.transformer_blocks.0.attn1.q_norm.weight", Shape{256}},
      {"model.diffusion_model.transformer_blocks.0.attn1.to_gate_logits.weight", Shape{4, 256}},
      {"model.diffusion_model.transformer_blocks.0.ff.net.0.proj.weight", Shape{512, 256}},
      {"model.diffusion_model.transformer_blocks.0.ff.net.2.weight", Shape{256, 512}},
      {"model.diffusion_model.transformer_blocks.0.audio_attn1.to_k.weight", Shape{64, 64}},
      {"model.diffusion_model.video_embeddings_connector.learnable_registers", Shape{8, 256}},
      {"vae.decoder.conv_in.conv.weight", Shape{8, 4, 3, 3, 3}},
  };
  return shapes;
}

inline const std::map<std::string, std::string>& tiny_transformer_metadata() {
  static const std::map<std::string, std::string> md = {
      {"config", R"({"transformer": {"num_layers": 1}})"}, {"model_version", "2.3.0"}};
  return md;
}

// Writes the checkpoint to `path` (bf16); returns the tensors as written (bf16).
inline std::vector<std::pair<std::string, Tensor>> write_tiny_transformer_checkpoint(
    const std::string& path, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, shape] : tiny_transformer_shapes()) {
    std::vector<float> v(static_cast<size_t>(shape.numel()));
    for (float& x : v) x = dist(rng);
    tensors.emplace_back(name, Tensor::from_vector(v, shape).to(DType::BF16));
  }
  io::write_safetensors(path, tensors, tiny_transformer_metadata());
  return tensors;
}

}  // namespace ltx::test
