#include "models/transformer/text_kv_cache.h"

#include "backend/device_query.h"
#include "core/error.h"
#include "ops/shape.h"

namespace ltx::models::transformer {

AttentionKv TextKvCache::key_values(const Attention& attn, const Tensor& context,
                                    const std::vector<int64_t>& groups, int64_t block, int stream) {
  const int64_t b = context.size(0);
  LTX_CHECK(static_cast<int64_t>(groups.size()) == b, "text K/V cache: ", groups.size(),
            " context groups for a batch of ", b);
  // Per group: its cached entry, or one projection (in one batch) of the first sample of each
  // group not cached yet.
  const ContextGroupSlots g = context_group_slots(groups);
  std::vector<AttentionKv> by_slot(g.firsts.size());
  std::vector<size_t> missing;  // slots to project now
  std::vector<Tensor> parts;
  for (size_t u = 0; u < g.firsts.size(); ++u) {
    const auto it = entries_.find({block, stream, groups[static_cast<size_t>(g.firsts[u])]});
    if (it != entries_.end()) {
      by_slot[u] = it->second;
    } else {
      missing.push_back(u);
      parts.push_back(context.narrow(0, g.firsts[u], 1));
    }
  }
  if (!missing.empty()) {
    const AttentionKv fresh = attn.key_values(parts.size() == 1 ? parts.front() : ops::concat(parts, 0));
    for (size_t m = 0; m < missing.size(); ++m) {
      const size_t u = missing[m];
      const int64_t row = static_cast<int64_t>(m);
      by_slot[u] = {fresh.k.narrow(0, row, 1), fresh.v.narrow(0, row, 1)};
      const int64_t add = by_slot[u].k.nbytes() + by_slot[u].v.nbytes();
      // At most a quarter of (free + cache): the step's activations keep the rest.
      if (4 * (bytes_ + add) <= backend::free_memory_bytes(context.device()) + bytes_) {
        entries_[{block, stream, groups[static_cast<size_t>(g.firsts[u])]}] = by_slot[u];
        bytes_ += add;
      } else {
        ++refused_;
      }
    }
  }
  std::vector<AttentionKv> per;
  for (int64_t u : g.slot) per.push_back(by_slot[static_cast<size_t>(u)]);
  return stack_key_values(per);
}

}  // namespace ltx::models::transformer
