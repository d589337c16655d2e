#pragma once
// The text cross-attention's K / V kept across the steps of one denoising loop, for the models
// whose K / V do not depend on sigma: the 19B (no AdaLN on the text cross-attention) and 2.5
// checkpoints with use_prompt_adaln_single=false (the reference's "KV-cacheable" path; it computes
// them at every step). On 2.3 / 2.5 with the prompt AdaLN the K / V change with sigma and the
// blocks do not consult the cache.
//
// Owned by a denoiser, whose contexts and model stay fixed while it lives; entries are keyed by
// (block, stream, context group id: Modality::context_groups). Memory: each prompt's K and V of
// every block (the 19B at 1024 text tokens: ~1.2 GB per prompt in bf16). An entry is only kept
// while the cache stays under a quarter of what is free on the device plus the cache itself;
// past that, K / V are computed per step as before.
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "models/transformer/attention.h"

namespace ltx::models::transformer {

class TextKvCache {
 public:
  // K / V of `context` [B, S, D] for the text attention `attn` of block `block`, stream `stream`
  // (0 video, 1 audio): cached entries for the groups seen before, the others projected now (one
  // batch) and kept when the memory rule allows. `groups`: one id per sample (required).
  AttentionKv key_values(const Attention& attn, const Tensor& context, const std::vector<int64_t>& groups,
                         int64_t block, int stream);

  int64_t bytes() const { return bytes_; }
  size_t entries() const { return entries_.size(); }
  // Entries the memory rule turned away so far.
  int64_t refused() const { return refused_; }

 private:
  std::map<std::tuple<int64_t, int, int64_t>, AttentionKv> entries_;
  int64_t bytes_ = 0;
  int64_t refused_ = 0;
};

}  // namespace ltx::models::transformer
