#pragma once
// Embeddings1DConnector (reference: text_encoders/gemma/embeddings_connector.py): the small 1-D
// transformer that turns the projected text features into the diffusion transformer's video or
// audio context.
//
//   pads -> learnable_registers[p mod 128]  (the pads then count as tokens: full attention)
//   N x { x += attn1(rms(x), rope);  x += ff(rms(x)) }      (transformer_1d_blocks.i)
//   out = rms(x)                                            (rms: no weight, eps 1e-6)
//
// attn1 and ff are the transformer's own Attention and FeedForward (q/k RMSNorm, optional
// per-head gate); the RoPE is the transformer's over positions arange(S) on one axis with
// max_pos = connector_positional_embedding_max_pos and theta 10000.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/weights.h"
#include "models/config_json.h"
#include "models/transformer/attention.h"
#include "models/transformer/feed_forward.h"
#include "models/transformer/rope.h"
#include "nn/module.h"

namespace ltx::models::text {

struct Embeddings1DConnectorConfig {
  int64_t num_attention_heads = 30;
  int64_t attention_head_dim = 128;
  int64_t num_layers = 2;
  double positional_embedding_theta = 10000.0;  // never read from the checkpoint
  std::vector<double> positional_embedding_max_pos = {1};
  // The reference hard-codes 128 whatever connector_num_learnable_registers says; 0 disables the
  // replacement (a constructor option no configurator uses): the pads are then masked out.
  int64_t num_learnable_registers = 128;
  transformer::LTXRopeType rope_type = transformer::LTXRopeType::Split;
  bool double_precision_rope = false;
  bool apply_gated_attention = false;
  bool ff_bias = true;
  double norm_eps = 1e-6;

  int64_t inner_dim() const { return num_attention_heads * attention_head_dim; }

  // Embeddings1DConnectorConfigurator / AudioEmbeddings1DConnectorConfigurator: the connector_*
  // keys of config.transformer (the audio one reads audio_connector_{num_attention_heads,
  // attention_head_dim,num_layers}, falling back to the video keys), rope_type,
  // frequencies_precision.
  static Embeddings1DConnectorConfig video_from_config(const ConfigReader& r);
  static Embeddings1DConnectorConfig audio_from_config(const ConfigReader& r);
};

// _BasicTransformerBlock1D.
struct ConnectorBlock {
  transformer::Attention attn1;
  transformer::FeedForward ff;
  double norm_eps = 1e-6;
  // x [B, S, W]; additive_mask undefined or [B, 1, 1, S].
  Tensor operator()(const Tensor& x, const transformer::RopeTables& pe,
                    const Tensor& additive_mask) const;
};

struct ConnectorOutput {
  Tensor hidden_states;  // [B, S, W]
  // The mask the reference returns: all zeros (every position attends) once the registers have
  // replaced the pads; the input mask when registers are disabled.
  Tensor additive_mask;
};

class Embeddings1DConnector {
 public:
  // Binds learnable_registers [R, W] and transformer_1d_blocks.{i}.{attn1,ff}.* from `w` (a view
  // scoped at the connector, e.g. "video_connector.").
  static Embeddings1DConnector load(io::WeightMap& w, const Embeddings1DConnectorConfig& config,
                                    const nn::LoadOptions& opt = {});

  const Embeddings1DConnectorConfig& config() const { return config_; }
  const std::vector<ConnectorBlock>& blocks() const { return blocks_; }
  const Tensor& learnable_registers() const { return learnable_registers_; }  // [R, W]

  // hidden_states [B, S, W] (W = inner_dim; S a multiple of the register count); additive_mask
  // [B, 1, 1, S]: >= 0 for tokens, negative for pads (undefined: no pads). With registers, pad
  // position p takes registers[p mod R] (whatever side the pads are on; the processor moves them
  // to the end first).
  ConnectorOutput operator()(const Tensor& hidden_states, const Tensor& additive_mask) const;

  // The RoPE tables of a length-S sequence ([1, H, S, Dh/2] for split RoPE).
  transformer::RopeTables rope(int64_t seq_len, Device device) const;

 private:
  Embeddings1DConnectorConfig config_;
  Tensor learnable_registers_;  // [R, W]
  std::vector<ConnectorBlock> blocks_;
};

}  // namespace ltx::models::text
