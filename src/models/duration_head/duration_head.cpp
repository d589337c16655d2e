#include "models/duration_head/duration_head.h"

#include <cmath>

#include "io/safetensors.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/shape.h"

namespace ltx::models::duration_head {

namespace {

// The value rounded to bf16 (and back to f32) in Bf16Steps mode; unchanged otherwise.
Tensor step(const Tensor& x, Precision p) {
  return p == Precision::Bf16Steps ? x.to(DType::BF16).to(DType::F32) : x;
}

Tensor linear(const nn::Linear& l, const Tensor& x, Precision p) { return step(l(x), p); }

}  // namespace

AttentionPooler AttentionPooler::load(io::WeightMap& w, const DurationHeadConfig& c,
                                      const nn::LoadOptions& opt) {
  AttentionPooler a;
  const int64_t d = c.pooler_hidden_dim;
  a.num_heads = c.num_pooler_heads;
  a.query_tokens = w.take("query_tokens", {c.num_queries, d}, opt.dtype, opt.device);
  a.in_proj.weight = w.take("cross_attn.in_proj_weight", {3 * d, d}, opt.dtype, opt.device);
  a.in_proj.bias = w.take("cross_attn.in_proj_bias", {3 * d}, opt.dtype, opt.device);
  a.out_proj = nn::Linear::load(w, "cross_attn.out_proj", d, d, true, opt);
  return a;
}

Tensor AttentionPooler::operator()(const Tensor& tokens, Precision p) const {
  const int64_t b = tokens.size(0), t = tokens.size(1), d = tokens.size(2);
  const int64_t nq = query_tokens.size(0), hd = d / num_heads;
  // The packed projection: rows [0, d) act on the queries, [d, 3d) on the tokens (keys | values).
  const Tensor wq = in_proj.weight.narrow(0, 0, d), bq = in_proj.bias.narrow(0, 0, d);
  const Tensor wkv = in_proj.weight.narrow(0, d, 2 * d), bkv = in_proj.bias.narrow(0, d, 2 * d);
  const Tensor queries = query_tokens.unsqueeze(0).expand({b, nq, d});
  const Tensor q = step(ops::linear(queries, wq, bq), p);
  const Tensor kv = step(ops::linear(tokens, wkv, bkv), p);
  const Tensor k = kv.narrow(2, 0, d), v = kv.narrow(2, d, d);
  auto heads = [&](const Tensor& x, int64_t n) {  // [B, n, D] -> [B, H, n, hd]
    return x.reshape({b, n, num_heads, hd}).permute({0, 2, 1, 3});
  };
  Tensor o = step(ops::scaled_dot_product_attention(heads(q, nq), heads(k, t), heads(v, t)), p);
  o = o.permute({0, 2, 1, 3}).reshape({b, nq, d});
  return linear(out_proj, o, p);
}

DurationHead DurationHead::load(io::WeightMap& w, const DurationHeadConfig& c,
                                const nn::LoadOptions& opt) {
  DurationHead h;
  h.config_ = c;
  const int64_t d = c.pooler_hidden_dim;
  h.video_input_proj_ =
      nn::Linear::load(w, "video_input_proj", c.video_cross_attention_dim, d, true, opt);
  h.video_modality_emb_ = w.take("video_modality_emb", {d}, opt.dtype, opt.device);
  h.audio_input_proj_ =
      nn::Linear::load(w, "audio_input_proj", c.audio_cross_attention_dim, d, true, opt);
  h.audio_modality_emb_ = w.take("audio_modality_emb", {d}, opt.dtype, opt.device);
  io::WeightMap pw = w.scoped("attention_pooler.");
  h.attention_pooler_ = AttentionPooler::load(pw, c, opt);
  h.mlp_hidden_ = nn::Linear::load(w, "mlp_hidden", d * c.num_queries, c.mlp_hidden, true, opt);
  h.mlp_out_ = nn::Linear::load(w, "mlp_out", c.mlp_hidden, 1, true, opt);
  return h;
}

DurationHead DurationHead::from_file(const std::string& path, const nn::LoadOptions& opt) {
  auto file = io::SafetensorsFile::open(path);
  LTX_CHECK(has_duration_head(*file), path,
            ": no duration_head.* tensors, so this checkpoint has no duration head (it ships from "
            "LTX-2.5 on); pass the frame count explicitly");
  const DurationHeadConfig config = duration_head_config_from_metadata(file->metadata_json(), path);
  io::WeightMap w({file}, duration_head_key_map());
  DurationHead h = load(w, config, opt);
  w.finish(str("duration head (", path, ")"));
  return h;
}

std::optional<DurationHead> DurationHead::try_from_file(const std::string& path,
                                                        const nn::LoadOptions& opt) {
  if (!has_duration_head(*io::SafetensorsFile::open(path))) return std::nullopt;
  return from_file(path, opt);
}

Tensor DurationHead::log_seconds(const Tensor& video_tokens, const Tensor& audio_tokens,
                                 Precision p, const Probe& probe) const {
  LTX_CHECK(video_tokens.defined() || audio_tokens.defined(),
            "duration head: needs the video and/or the audio connector output, got neither");
  std::vector<Tensor> groups;
  auto project = [&](const Tensor& x, const nn::Linear& proj, const Tensor& emb, int64_t width,
                     const char* what) {
    LTX_CHECK(x.dim() == 3 && x.size(2) == width, "duration head: ", what,
              " tokens must be [B, T, ", width, "] (the connector output width), got ",
              x.describe());
    const Tensor y = linear(proj, step(x.to(DType::F32), p), p);
    if (probe) probe(str(what, "_proj"), y);
    groups.push_back(step(ops::add(y, emb), p));
  };
  if (video_tokens.defined())
    project(video_tokens, video_input_proj_, video_modality_emb_, config_.video_cross_attention_dim,
            "video");
  if (audio_tokens.defined())
    project(audio_tokens, audio_input_proj_, audio_modality_emb_, config_.audio_cross_attention_dim,
            "audio");
  LTX_CHECK(groups.size() == 1 || groups[0].size(0) == groups[1].size(0),
            "duration head: video and audio tokens have different batch sizes (", groups[0].size(0),
            " vs ", groups.back().size(0), ")");
  const Tensor tokens = groups.size() == 1 ? groups[0] : ops::concat(groups, 1);
  if (probe) probe("pooler_in", tokens);
  const Tensor pooled = attention_pooler_(tokens, p);
  if (probe) probe("pooled", pooled);
  const Tensor hidden = linear(mlp_hidden_, pooled.reshape({pooled.size(0), -1}), p);
  if (probe) probe("mlp_hidden_pre_gelu", hidden);
  const Tensor log_s = linear(mlp_out_, step(ops::gelu_tanh(hidden), p), p);
  if (probe) probe("log_seconds", log_s);
  return log_s.reshape({log_s.size(0)});
}

Tensor DurationHead::operator()(const Tensor& video_tokens, const Tensor& audio_tokens,
                                Precision p) const {
  return step(ops::exp(log_seconds(video_tokens, audio_tokens, p)), p);
}

}  // namespace ltx::models::duration_head
