#pragma once
// The LTX-2.5 duration head (reference: ltx_core/duration_head/duration_head.py): a small
// regression head that predicts the natural duration of a shot, in seconds, from the text
// connectors' outputs.
//
//   tokens  = [video_input_proj(v) + video_modality_emb ; audio_input_proj(a) + audio_modality_emb]
//             (along the sequence, video first; a missing modality is left out)
//   pooled  = MultiheadAttention(query = query_tokens, key = value = tokens)   (no mask)
//   seconds = exp(mlp_out(gelu_tanh(mlp_hidden(pooled.flatten()))))
//
// Configuration and key filter: model_configurator.h.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "io/weights.h"
#include "models/duration_head/model_configurator.h"
#include "nn/linear.h"
#include "nn/module.h"

namespace ltx::models::duration_head {

using Probe = std::function<void(const std::string& name, const Tensor& value)>;

// How activations are rounded between the head's operations. The CPU computes in f32; Bf16Steps
// additionally rounds the inputs and every operation's output to bf16, approximating the
// pipelines' bf16-built head (torch's own bf16 kernels are not reproduced bit for bit).
enum class Precision { F32, Bf16Steps };

// nn.MultiheadAttention(batch_first=True) with learnable queries (AttentionPooler).
struct AttentionPooler {
  Tensor query_tokens;  // [num_queries, D]
  nn::Linear in_proj;   // packed [Wq; Wk; Wv] [3D, D] + bias
  nn::Linear out_proj;
  int64_t num_heads = 4;

  static AttentionPooler load(io::WeightMap& w, const DurationHeadConfig& c,
                              const nn::LoadOptions& opt);
  // tokens [B, T, D] -> [B, num_queries, D]
  Tensor operator()(const Tensor& tokens, Precision precision = Precision::F32) const;
};

class DurationHead {
 public:
  static DurationHead load(io::WeightMap& w, const DurationHeadConfig& config,
                           const nn::LoadOptions& opt = {});
  // Opens a file holding `duration_head.*` (its own file, or a checkpoint that bundles it): config
  // from the metadata, every `duration_head.*` tensor must be used. Throws when there is none.
  static DurationHead from_file(const std::string& path, const nn::LoadOptions& opt = {});
  // As from_file, but nullopt when the file has no duration-head tensors (the reference's
  // DurationPredictor.from_checkpoint returning None).
  static std::optional<DurationHead> try_from_file(const std::string& path,
                                                   const nn::LoadOptions& opt = {});

  const DurationHeadConfig& config() const { return config_; }

  // Log-seconds [B] from video_tokens [B, Tv, video_dim] and/or audio_tokens [B, Ta, audio_dim]
  // (either may be undefined, not both). Probe names: video_proj, audio_proj (before the modality
  // embedding), pooler_in, pooled, mlp_hidden_pre_gelu, log_seconds.
  Tensor log_seconds(const Tensor& video_tokens, const Tensor& audio_tokens,
                     Precision precision = Precision::F32, const Probe& probe = {}) const;
  // exp(log_seconds): the predicted duration in seconds [B].
  Tensor operator()(const Tensor& video_tokens, const Tensor& audio_tokens,
                    Precision precision = Precision::F32) const;

 private:
  DurationHeadConfig config_;
  nn::Linear video_input_proj_, audio_input_proj_;
  Tensor video_modality_emb_, audio_modality_emb_;  // [D]
  AttentionPooler attention_pooler_;
  nn::Linear mlp_hidden_, mlp_out_;
};

}  // namespace ltx::models::duration_head
