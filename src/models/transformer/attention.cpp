#include "models/transformer/attention.h"

#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "ops/shape.h"

namespace ltx::models::transformer {

Attention Attention::load(io::WeightMap& w, int64_t query_dim, int64_t context_dim, int64_t heads,
                          int64_t dim_head, double norm_eps, LTXRopeType rope_type,
                          bool apply_gated_attention, const nn::LoadOptions& opt) {
  Attention a;
  a.heads = heads;
  a.dim_head = dim_head;
  a.norm_eps = norm_eps;
  a.rope_type = rope_type;
  const int64_t inner = heads * dim_head;
  if (context_dim == 0) context_dim = query_dim;
  a.q_norm = w.take("q_norm.weight", {inner}, opt.dtype, opt.device);
  a.k_norm = w.take("k_norm.weight", {inner}, opt.dtype, opt.device);
  a.to_q = nn::Linear::load(w, "to_q", query_dim, inner, true, opt);
  a.to_k = nn::Linear::load(w, "to_k", context_dim, inner, true, opt);
  a.to_v = nn::Linear::load(w, "to_v", context_dim, inner, true, opt);
  if (apply_gated_attention)
    a.to_gate_logits = nn::Linear::load(w, "to_gate_logits", query_dim, heads, true, opt);
  a.to_out = nn::Linear::load(w, "to_out.0", inner, query_dim, true, opt);
  return a;
}

ContextGroupSlots context_group_slots(const std::vector<int64_t>& groups) {
  ContextGroupSlots g;
  g.slot.resize(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    size_t u = 0;
    while (u < g.firsts.size() && groups[static_cast<size_t>(g.firsts[u])] != groups[i]) ++u;
    if (u == g.firsts.size()) g.firsts.push_back(static_cast<int64_t>(i));
    g.slot[i] = static_cast<int64_t>(u);
  }
  return g;
}

AttentionKv Attention::key_values(const Tensor& context, const std::vector<int64_t>& groups) const {
  LTX_CHECK(context.dim() == 3, "attention: context must be [B, S, D], got ", context.describe());
  const int64_t b = context.size(0), s = context.size(1);
  LTX_CHECK(groups.empty() || static_cast<int64_t>(groups.size()) == b, "attention: ", groups.size(),
            " context groups for a batch of ", b);
  const auto project = [&](const Tensor& c) {
    const int64_t n = c.size(0);
    AttentionKv kv;
    kv.k = ops::rms_norm(to_k(c), k_norm, norm_eps).view({n, s, heads, dim_head}).transpose(1, 2);
    kv.v = to_v(c);
    return kv;
  };
  const ContextGroupSlots g = context_group_slots(groups);
  if (g.firsts.size() == groups.size()) return project(context);  // no sample repeats another
  // The first sample of each group, projected as one batch; then every sample takes its group's.
  std::vector<Tensor> parts;
  for (int64_t i : g.firsts) parts.push_back(context.narrow(0, i, 1));
  const AttentionKv unique = project(parts.size() == 1 ? parts.front() : ops::concat(parts, 0));
  std::vector<AttentionKv> per;
  for (int64_t u : g.slot) per.push_back({unique.k.narrow(0, u, 1), unique.v.narrow(0, u, 1)});
  return stack_key_values(per);
}

AttentionKv stack_key_values(const std::vector<AttentionKv>& per_sample) {
  LTX_CHECK(!per_sample.empty(), "attention: no K/V to stack");
  std::vector<Tensor> ks, vs;
  // k in the [B, H, S, Dh] view of a [B, S, H, Dh] tensor, as Attention::key_values forms it.
  for (const AttentionKv& kv : per_sample) {
    ks.push_back(kv.k.transpose(1, 2));
    vs.push_back(kv.v);
  }
  AttentionKv kv;
  kv.k = (ks.size() == 1 ? ks.front().contiguous() : ops::concat(ks, 0)).transpose(1, 2);
  kv.v = vs.size() == 1 ? vs.front() : ops::concat(vs, 0);
  return kv;
}

Tensor Attention::operator()(const Tensor& x, const AttentionOptions& o) const {
  LTX_CHECK(x.dim() == 3, "attention: x must be [B, T, D], got ", x.describe());
  const Tensor& context = o.context.defined() ? o.context : x;
  LTX_CHECK(context.dim() == 3 && context.size(0) == x.size(0),
            "attention: context must be [B, S, D] with x's batch, got ", context.describe(), " for x ",
            x.describe());
  const int64_t b = x.size(0), t = x.size(1), s = context.size(1);
  LTX_CHECK(o.kv == nullptr || (o.pe == nullptr && o.kv->k.size(0) == b && o.kv->k.size(2) == s),
            "attention: precomputed keys/values take no RoPE and must match the context's batch and "
            "length");
  Tensor v = o.kv != nullptr ? o.kv->v : to_v(context);  // [B, S, inner]
  // Per-head gate in (0, 2), also on the STG shortcut; x is the query-side input.
  const Tensor logits = to_gate_logits ? (*to_gate_logits)(x) : Tensor();  // [B, T, H]
  // Without a perturbation blend the attention kernels apply the gate as they store the output.
  const bool gate_in_sdpa = logits.defined() && !o.all_perturbed && !o.perturbation_mask.defined();
  Tensor out;
  if (o.all_perturbed) {
    out = v;  // STG shortcut: the value projection stands in for the attention output
  } else {
    // q_norm / k_norm over the inner dim, then the RoPE (both as one op), as [B, H, T, Dh].
    const RopeTables* kp = o.k_pe != nullptr ? o.k_pe : o.pe;
    const bool split = rope_type == LTXRopeType::Split;
    const ops::RopeLayout layout = split ? ops::RopeLayout::Split : ops::RopeLayout::Interleaved;
    // [B, rows, inner] -> [B, H, rows, Dh]; the Split kernels store that layout themselves.
    const auto head_major = [&](const Tensor& y, bool rotated) {
      return split && rotated ? y : y.view({b, y.size(1), heads, dim_head}).transpose(1, 2);
    };
    const auto prepare = [&](const Tensor& y, const Tensor& norm, const RopeTables* tables) {
      if (tables == nullptr) return head_major(ops::rms_norm(y, norm, norm_eps), false);
      return head_major(ops::rms_norm_rope(y, norm, norm_eps, tables->cos, tables->sin, layout, heads),
                        true);
    };
    Tensor qh, kh;
    if (o.kv == nullptr && o.pe != nullptr && kp == o.pe && s == t) {
      // q and k rotated by one table pair (self-attention): one launch reads it once for both.
      const ops::QkRope r = ops::qk_rms_norm_rope(to_q(x), to_k(context), q_norm, k_norm, norm_eps,
                                                  o.pe->cos, o.pe->sin, layout, heads);
      qh = head_major(r.q, true);
      kh = head_major(r.k, true);
    } else {
      qh = prepare(to_q(x), q_norm, o.pe);
      kh = o.kv != nullptr ? o.kv->k : prepare(to_k(context), k_norm, o.pe != nullptr ? kp : nullptr);
    }
    const Tensor vh = v.view({b, s, heads, dim_head}).transpose(1, 2);
    Tensor mask = o.mask;
    if (mask.defined() && mask.dim() == 2) mask = mask.unsqueeze(0);
    if (mask.defined() && mask.dim() == 3) mask = mask.unsqueeze(1);
    out = ops::scaled_dot_product_attention(
              qh, kh, vh, {.mask = mask, .head_gate_logits = gate_in_sdpa ? logits : Tensor()})
              .transpose(1, 2)
              .contiguous()
              .view({b, t, heads * dim_head});
    if (o.perturbation_mask.defined()) {
      const Tensor keep = o.perturbation_mask, drop = ops::add(ops::neg(o.perturbation_mask), 1.0);
      out = ops::add(ops::mul(out, keep), ops::mul(v, drop));  // out * m + v * (1 - m)
    }
  }
  if (logits.defined() && !gate_in_sdpa) {
    out = ops::mul_2sigmoid(out.view({b, t, heads, dim_head}), logits.unsqueeze(-1))
              .view({b, t, heads * dim_head});
  }
  return to_out(out);
}

}  // namespace ltx::models::transformer
