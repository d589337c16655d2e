#pragma once
// Gemma 3's image path, as HF transformers' Gemma3ForConditionalGeneration runs it for the
// reference's image-aware prompt enhancement (LTXGemmaTextEncoder.enhance_i2v):
//
//   * the SigLIP vision tower (`vision_tower.vision_model.*`): a patch embedding (a convolution
//     with stride = kernel = patch_size, i.e. a linear map of each patch's pixels in (channel,
//     row, column) order) plus learned position embeddings; encoder layers of
//       h += out_proj(attention(layer_norm1(h)))   (biased q/k/v, every patch sees every patch,
//                                                    scale head_dim^-0.5)
//       h += fc2(gelu_tanh(fc1(layer_norm2(h))))
//     and post_layernorm (no pooling head: Gemma 3 reads last_hidden_state);
//   * the multi-modal projector (`multi_modal_projector.*`): the patch grid average-pooled to
//     mm_tokens_per_image tokens (kernel = stride = patches per side / tokens per side), Gemma's
//     RMSNorm with scale (1 + w), then a matmul with mm_input_projection_weight [vision, text].
//
// The result replaces the embeddings of the image soft tokens in the language model's input
// (GemmaPrefillImages in model.h). Loaded only for an image-aware enhancement: the text encoder
// and the memory planner leave these tensors out otherwise.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/text/gemma_assets.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ltx::text {

struct GemmaVisionConfig {
  std::string source;
  // vision_config (SiglipVisionConfig)
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_channels = 3;
  int64_t image_size = 0;
  int64_t patch_size = 0;
  double layer_norm_eps = 1e-6;
  // The top-level config.
  int64_t text_hidden_size = 0;
  int64_t mm_tokens_per_image = 256;
  int64_t boi_token_id = 255999;
  int64_t eoi_token_id = 256000;
  int64_t image_token_id = 262144;

  int64_t patches_per_side() const { return image_size / patch_size; }
  int64_t tokens_per_side() const;  // sqrt(mm_tokens_per_image)

  // From the HF config of a Gemma 3 model (model_type "gemma3" with a vision_config). Throws,
  // naming `source` and what is supported, for any other model or an unusable vision config.
  static GemmaVisionConfig from_json(const nlohmann::json& config, const std::string& source);
};

// Whether the config describes a Gemma 3 with a vision tower (model_type "gemma3" and a
// vision_config object).
bool has_gemma3_vision_config(const nlohmann::json& config);

struct SiglipLayerNorm {
  Tensor weight, bias;
  double eps = 1e-6;
  Tensor operator()(const Tensor& x) const;
};

struct SiglipEncoderLayer {
  SiglipLayerNorm layer_norm1, layer_norm2;
  nn::Linear q_proj, k_proj, v_proj, out_proj;
  nn::Linear fc1, fc2;
};

// The names of the tensors this model binds start with these (checkpoint names).
inline constexpr const char* kGemmaVisionTowerPrefix = "vision_tower.vision_model.";
inline constexpr const char* kGemmaProjectorPrefix = "multi_modal_projector.";

class GemmaVisionTower {
 public:
  // Binds `vision_tower.vision_model.*` and `multi_modal_projector.*` from the assets' weight
  // files. Missing or misshaped tensors are reported in one error naming the files; a text
  // encoder without these tensors gets an error saying that image-aware enhancement needs the
  // full Gemma 3 checkpoint.
  static GemmaVisionTower load(const GemmaAssets& assets, const nn::LoadOptions& opt = {});
  static GemmaVisionTower load(const GemmaVisionConfig& config,
                               const std::vector<std::string>& weight_paths,
                               const nn::LoadOptions& opt = {});

  const GemmaVisionConfig& config() const { return config_; }

  // pixel_values [B, 3, S, S] (S = image_size) -> vision_tower(...).last_hidden_state
  // [B, P, vision hidden] (P = patches_per_side^2).
  Tensor vision(const Tensor& pixel_values) const;
  // vision output [B, P, vision hidden] -> [B, mm_tokens_per_image, text hidden].
  Tensor project(const Tensor& vision_out) const;
  // Both: the image features that replace the image soft tokens.
  Tensor encode(const Tensor& pixel_values) const { return project(vision(pixel_values)); }

 private:
  GemmaVisionConfig config_;
  nn::Linear patch_embedding;  // the conv kernel as [hidden, channels * patch * patch]
  Tensor position_embedding;   // [P, hidden]
  std::vector<SiglipEncoderLayer> layers_;
  SiglipLayerNorm post_layernorm;
  Tensor soft_emb_norm_scale;  // (1 + mm_soft_emb_norm.weight) [vision hidden]
  Tensor input_projection;     // mm_input_projection_weight [vision hidden, text hidden]
};

}  // namespace ltx::text
