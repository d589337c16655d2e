#pragma once
// Attention (reference: model/transformer/attention.py, ops.py): to_q/to_k/to_v/to_out.0 with
// biases, q_norm/k_norm (RMSNorm with weight over the whole inner dim), RoPE, scaled dot-product
// attention per head, the STG perturbation blend, and the optional per-head gate
// 2 * sigmoid(to_gate_logits(x)) (2.3 / 2.5; applied by the attention kernels as they store their
// output, unless the STG blend comes between).
#include <cstdint>
#include <optional>
#include <vector>

#include "models/transformer/rope.h"
#include "nn/linear.h"

namespace ltx::models::transformer {

// The keys (normalised by k_norm, [B, H, S, Dh]) and values ([B, S, inner]) of a context without
// RoPE on the keys (the text cross-attention), computed once and passed to operator() in place of
// the context's own projections.
struct AttentionKv {
  Tensor k, v;
};

// One sample's K / V each ([1, H, S, Dh] and [1, S, inner]) stacked into a batch in that order.
AttentionKv stack_key_values(const std::vector<AttentionKv>& per_sample);

// The groups of Modality::context_groups as the K / V sharing walks them: `firsts` the first
// sample of each distinct id (in order), `slot[i]` the index into `firsts` of sample i's id.
struct ContextGroupSlots {
  std::vector<int64_t> firsts, slot;
};
ContextGroupSlots context_group_slots(const std::vector<int64_t>& groups);

// The optional inputs of one Attention call (attention.py's forward keywords), by name:
//   attn(x, {.context = ctx, .mask = bias, .kv = &kv}).
struct AttentionOptions {
  Tensor context;  // [B, S, context_dim]; undefined: x (self-attention)
  // Undefined or an additive bias broadcastable to [B, H, T, S] ([B, 1, T, S], [B, 1, 1, S]; a
  // 2-D mask gets a batch dim, a 3-D one a head dim, as the reference's SDPA wrapper does).
  Tensor mask;
  const RopeTables* pe = nullptr;    // RoPE tables for q (and k unless k_pe is given)
  const RopeTables* k_pe = nullptr;  // RoPE tables for k
  // [B, 1, 1] STG blend out * m + to_v(context) * (1 - m); undefined: none.
  Tensor perturbation_mask;
  bool all_perturbed = false;  // skips q/k entirely: out = to_v(context)
  // The context's key_values: `context` then only gives the batch and length checks; no RoPE
  // on the keys (pe must be null).
  const AttentionKv* kv = nullptr;
};

struct Attention {
  nn::Linear to_q, to_k, to_v, to_out;
  Tensor q_norm, k_norm;                 // [inner]
  std::optional<nn::Linear> to_gate_logits;  // [heads, query_dim]
  int64_t heads = 0, dim_head = 0;
  double norm_eps = 1e-6;
  LTXRopeType rope_type = LTXRopeType::Split;

  // context_dim 0: self-attention (context_dim = query_dim).
  static Attention load(io::WeightMap& w, int64_t query_dim, int64_t context_dim, int64_t heads,
                        int64_t dim_head, double norm_eps, LTXRopeType rope_type,
                        bool apply_gated_attention, const nn::LoadOptions& opt);

  int64_t inner_dim() const { return heads * dim_head; }

  // x [B, T, query_dim] -> [B, T, query_dim].
  Tensor operator()(const Tensor& x, const AttentionOptions& options = {}) const;

  // to_k + k_norm and to_v of `context` [B, S, context_dim], as operator() forms them without
  // key RoPE. `groups` (empty, or one id per sample): samples of equal id have equal contexts;
  // the projections run on the first sample of each id and are copied to the others: the same
  // math, equal to the last bit unless the GEMM library sums in another order for the smaller
  // row count (cuBLASLt may pick another kernel).
  AttentionKv key_values(const Tensor& context, const std::vector<int64_t>& groups = {}) const;
};

}  // namespace ltx::models::transformer
