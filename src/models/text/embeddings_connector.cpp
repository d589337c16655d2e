#include "models/text/embeddings_connector.h"

#include "core/error.h"
#include "models/text/token_mask.h"
#include "models/transformer/config.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/shape.h"
#include "quantization/ggml_dequant.h"

namespace ltx::models::text {

namespace tf = transformer;

namespace {

Embeddings1DConnectorConfig common_from_config(const ConfigReader& r) {
  Embeddings1DConnectorConfig c;
  c.rope_type = tf::rope_type_from_config(r);
  c.double_precision_rope = tf::double_precision_rope_from_config(r);
  c.positional_embedding_max_pos = r.numbers("connector_positional_embedding_max_pos", {1});
  // The positions are one axis (arange(S)); the reference asserts one max_pos per axis.
  if (c.positional_embedding_max_pos.size() != 1)
    r.error("connector_positional_embedding_max_pos",
            str("must hold exactly one number (the connector's positions are 1-D), got ",
                r.find("connector_positional_embedding_max_pos")->dump()));
  c.apply_gated_attention = r.boolean("connector_apply_gated_attention", false);
  c.ff_bias = r.boolean("connector_ff_bias", true);
  return c;
}

void check_dims(const ConfigReader& r, const Embeddings1DConnectorConfig& c, const char* head_dim_key) {
  if (c.rope_type == tf::LTXRopeType::Split && c.attention_head_dim % 2 != 0)
    r.error(head_dim_key, str("must be even for split rotary embeddings, got ", c.attention_head_dim));
}

}  // namespace

Embeddings1DConnectorConfig Embeddings1DConnectorConfig::video_from_config(const ConfigReader& r) {
  Embeddings1DConnectorConfig c = common_from_config(r);
  c.num_attention_heads = r.integer("connector_num_attention_heads", 30);
  c.attention_head_dim = r.integer("connector_attention_head_dim", 128);
  c.num_layers = r.integer("connector_num_layers", 2, 0);
  check_dims(r, c, "connector_attention_head_dim");
  return c;
}

Embeddings1DConnectorConfig Embeddings1DConnectorConfig::audio_from_config(const ConfigReader& r) {
  Embeddings1DConnectorConfig c = common_from_config(r);
  // Fall back to the video connector's keys (older files have one connector shape).
  c.num_attention_heads = r.integer("audio_connector_num_attention_heads",
                                    r.integer("connector_num_attention_heads", 30));
  c.attention_head_dim = r.integer("audio_connector_attention_head_dim",
                                   r.integer("connector_attention_head_dim", 128));
  c.num_layers = r.integer("audio_connector_num_layers", r.integer("connector_num_layers", 2, 0), 0);
  check_dims(r, c,
             r.has("audio_connector_attention_head_dim") ? "audio_connector_attention_head_dim"
                                                         : "connector_attention_head_dim");
  return c;
}

Tensor ConnectorBlock::operator()(const Tensor& x, const tf::RopeTables& pe,
                                  const Tensor& additive_mask) const {
  const Tensor attn = attn1(ops::rms_norm(x, Tensor(), norm_eps), {.mask = additive_mask, .pe = &pe});
  const Tensor h = ops::add(attn, x);
  return ops::add(ff(ops::rms_norm(h, Tensor(), norm_eps)), h);
}

Embeddings1DConnector Embeddings1DConnector::load(io::WeightMap& w,
                                                  const Embeddings1DConnectorConfig& config,
                                                  const nn::LoadOptions& opt) {
  LTX_CHECK(config.num_attention_heads > 0 && config.attention_head_dim > 0 &&
                config.num_layers >= 0 && config.num_learnable_registers >= 0,
            "embeddings connector: bad configuration (", config.num_attention_heads, " heads of ",
            config.attention_head_dim, ", ", config.num_layers, " layers, ",
            config.num_learnable_registers, " registers)");
  Embeddings1DConnector c;
  c.config_ = config;
  const int64_t dim = config.inner_dim();
  if (config.num_learnable_registers > 0)
    c.learnable_registers_ =
        quantization::take_dense(w, "learnable_registers", {config.num_learnable_registers, dim},
                                 opt.dtype, opt.device);
  for (int64_t i = 0; i < config.num_layers; ++i) {
    io::WeightMap b = w.scoped(str("transformer_1d_blocks.", i, "."));
    io::WeightMap a = b.scoped("attn1."), f = b.scoped("ff.");
    c.blocks_.push_back(
        {tf::Attention::load(a, dim, 0, config.num_attention_heads, config.attention_head_dim,
                             config.norm_eps, config.rope_type, config.apply_gated_attention, opt),
         tf::FeedForward::load(f, dim, dim, config.ff_bias, opt), config.norm_eps});
  }
  return c;
}

tf::RopeTables Embeddings1DConnector::rope(int64_t seq_len, Device device) const {
  // Positions arange(S) on one axis as [start, end) = [p, p]: the transformer's RoPE takes the
  // interval middle, which is p exactly.
  const Tensor p = Tensor::arange(seq_len).view({1, 1, seq_len, 1});
  const Tensor positions = ops::concat({p, p}, 3).to(device);
  return tf::precompute_freqs_cis(positions, config_.inner_dim(), config_.positional_embedding_theta,
                                  config_.positional_embedding_max_pos, config_.num_attention_heads,
                                  config_.rope_type, config_.double_precision_rope);
}

ConnectorOutput Embeddings1DConnector::operator()(const Tensor& hidden_states,
                                                  const Tensor& additive_mask) const {
  const int64_t dim = config_.inner_dim();
  LTX_CHECK(hidden_states.dim() == 3 && hidden_states.size(2) == dim,
            "embeddings connector: hidden states must be [B, S, ", dim, "], got ",
            hidden_states.describe());
  const int64_t b = hidden_states.size(0), s = hidden_states.size(1);
  LTX_CHECK(!additive_mask.defined() ||
                (additive_mask.dim() == 4 && additive_mask.size(0) == b && additive_mask.size(1) == 1 &&
                 additive_mask.size(2) == 1 && additive_mask.size(3) == s),
            "embeddings connector: the additive mask must be [", b, ", 1, 1, ", s, "], got ",
            additive_mask.describe());
  const Device device = hidden_states.device();
  Tensor x = hidden_states;
  Tensor attn_mask = additive_mask.defined() ? additive_mask.to(device, x.dtype()) : Tensor();
  const int64_t regs = config_.num_learnable_registers;
  if (regs > 0) {
    LTX_CHECK(s % regs == 0, "embeddings connector: the sequence length ", s,
              " must be a multiple of the ", regs,
              " learnable registers (the text encoder pads prompts to 1024 tokens)");
    if (additive_mask.defined()) {
      const TokenMask m = TokenMask::from_additive(additive_mask);
      const Tensor valid = m.binary(DType::F32, device).unsqueeze(-1);          // [B, S, 1]
      // registers.repeat(S / R, 1): [S, W] with row p = registers[p mod R].
      const Tensor tiled =
          learnable_registers_.unsqueeze(0).expand({s / regs, regs, dim}).reshape({s, dim});
      x = ops::where(valid, x, tiled);
    }
    // Every position now holds a token or a register: the mask becomes all zeros (adding it to
    // the attention logits is a no-op, so none is passed).
    attn_mask = Tensor();
  }
  const tf::RopeTables pe = rope(s, device);
  for (const ConnectorBlock& block : blocks_) x = block(x, pe, attn_mask);
  ConnectorOutput out;
  out.hidden_states = ops::rms_norm(x, Tensor(), config_.norm_eps);
  out.additive_mask =
      attn_mask.defined() ? attn_mask : Tensor::zeros({b, 1, 1, s}, x.dtype(), device);
  return out;
}

}  // namespace ltx::models::text
