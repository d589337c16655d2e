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
  std::vector<AttentionKv> per(static_cast<size_t>(b));
  std::vector<int64_t> missing;  // first sample of each group not cached yet
  std::vector<Tensor> parts;
  for (int64_t i = 0; i < b; ++i) {
    const int64_t id = groups[static_cast<size_t>(i)];
    const auto it = entries_.find({block, stream, id});
    if (it != entries_.end()) {
      per[static_cast<size_t>(i)] = it->second;
      continue;
    }
    bool seen = false;
    for (int64_t j : missing) seen = seen || groups[static_cast<size_t>(j)] == id;
    if (!seen) {
      missing.push_back(i);
      parts.push_back(context.narrow(0, i, 1));
    }
  }
  if (!missing.empty()) {
    const AttentionKv fresh = attn.key_values(parts.size() == 1 ? parts.front() : ops::concat(parts, 0));
    for (size_t u = 0; u < missing.size(); ++u) {
      const int64_t first = missing[u];
      const AttentionKv one{fresh.k.narrow(0, static_cast<int64_t>(u), 1),
                            fresh.v.narrow(0, static_cast<int64_t>(u), 1)};
      const int64_t id = groups[static_cast<size_t>(first)];
      for (int64_t i = 0; i < b; ++i)
        if (groups[static_cast<size_t>(i)] == id) per[static_cast<size_t>(i)] = one;
      const int64_t add = one.k.nbytes() + one.v.nbytes();
      // At most a quarter of (free + cache): the step's activations keep the rest.
      if (4 * (bytes_ + add) <= backend::free_memory_bytes(context.device()) + bytes_) {
        entries_[{block, stream, id}] = one;
        bytes_ += add;
      } else {
        ++refused_;
      }
    }
  }
  return stack_key_values(per);
}

}  // namespace ltx::models::transformer
