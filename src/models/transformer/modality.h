#pragma once
// Modality: what the pipelines pass the transformer for one stream (reference:
// model/transformer/modality.py).
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ltx::models::transformer {

class TextKvCache;


struct Modality {
  Tensor latent;     // [B, T, C] patchified latent tokens (noisy + conditioning)
  Tensor sigma;      // [B] the sample's sigma: prompt AdaLN and the OTHER stream's A/V gate
  Tensor timesteps;  // [B, T, 1] per token (sigma * denoise mask; conditioning tokens carry 0)
  Tensor positions;  // [B, n, T, 2] [start, end) per axis (n = 3 video, 1 audio)
  Tensor context;    // [B, L, Dc] text context (pre-projection on 19B)
  bool enabled = true;
  // Optional [B, L] text mask: integer/bool 1 = keep (made additive), or a float tensor that is
  // already an additive bias (passed through, as the reference does).
  Tensor context_mask;
  Tensor attention_mask;  // optional [B, T, T] self-attention strengths in [0, 1]
  Tensor keyframes_mask;  // optional [B, T, 1]: tokens that get keyframes_abs_pos_embedding
  // Optional, one id per sample: samples with equal ids have the same context, context mask and
  // sigma (the guidance passes that read the same prompt), so their text cross-attention K / V
  // are equal and computed once (Attention::key_values). Empty: every sample its own. The caller
  // vouches for the equality; nothing checks the data.
  std::vector<int64_t> context_groups;
  // Optional, with context_groups: K / V kept across calls for models whose K / V do not depend
  // on sigma (text_kv_cache.h); the ids must name the same contexts in every call. Not owned.
  TextKvCache* text_kv_cache = nullptr;
  // Optional host description of per-token `timesteps` [B, T, 1]: per sample the lengths of its
  // runs of equal values, in token order (summing to T). The AdaLN linears then run once per run
  // (on the run's first timestep) and are expanded to its tokens, instead of once per token: every
  // token's input row of a run is equal. Empty: none. The caller vouches that the tokens of a run
  // are equal; the lengths are checked.
  std::vector<std::vector<int64_t>> timestep_runs;
};

}  // namespace ltx::models::transformer
