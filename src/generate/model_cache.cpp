#include "generate/model_cache.h"

#include <cstdio>
#include <utility>

#include "backend/device_query.h"
#include "core/error.h"
#include "core/log.h"
#include "core/out_of_memory.h"

namespace ltx::generate {

namespace {

std::string mib(int64_t bytes) {
  if (bytes < 1024 * 1024) return str(bytes, " bytes");
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return s;
}

}  // namespace

ModelCache::ModelCache(Device device, int64_t budget_bytes, std::string budget_option)
    : device_(device), budget_(budget_bytes), budget_option_(std::move(budget_option)) {
  LTX_CHECK(budget_bytes >= 0, budget_option_, " ", budget_bytes, " must be >= 0 (0: no limit)");
}

ModelCache::~ModelCache() = default;

void ModelCache::check_fits_alone(const std::string& component, int64_t bytes,
                                  const char* how) const {
  LTX_CHECK(budget_ == 0 || bytes <= budget_, "the ", component, " needs ", mib(bytes), " (", how,
            "), more than the whole model memory budget of ", mib(budget_), "; raise ",
            budget_option_, device_.is_cuda() ? "" : " (0: no limit)");
}

void ModelCache::evict_to_fit(int64_t incoming, const Entry* keep) {
  if (budget_ == 0) return;
  for (auto it = entries_.begin(); it != entries_.end() && used_ + incoming > budget_;) {
    if (&*it == keep || it->value.use_count() > 1) {  // leased: in use by the running generation
      ++it;
      continue;
    }
    it = evict(it, str("to fit the budget of ", mib(budget_)));
  }
}

std::list<ModelCache::Entry>::iterator ModelCache::evict(std::list<Entry>::iterator it,
                                                         const std::string& why) {
  log_info("model cache: evicting the ", it->component, " (", mib(it->bytes), ") ", why);
  used_ -= it->bytes;
  ComponentStats& c = counts_[it->component];
  c.bytes -= it->bytes;
  c.entries -= 1;
  c.evictions += 1;
  return entries_.erase(it);
}

int64_t ModelCache::evict_unleased(const std::string& reason) {
  int64_t n = 0;
  {
    std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->value.use_count() > 1) {
        ++it;
        continue;
      }
      it = evict(it, reason);
      n += 1;
    }
  }
  if (n > 0) backend::release_cached_memory(device_);
  return n;
}

std::shared_ptr<void> ModelCache::acquire_entry(
    const std::string& component, const std::string& key,
    const std::function<int64_t()>& estimate_bytes,
    const std::function<std::shared_ptr<void>()>& load) {
  {
    std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->key == key) {
        entries_.splice(entries_.end(), entries_, it);  // now the most recently used
        return it->value;
      }
  }
  // A miss: make room for the size measured the last time this entry was loaded, else the
  // estimate from the files.
  int64_t estimate = 0;
  {
    std::lock_guard lock(mutex_);
    if (const auto k = known_bytes_.find(key); k != known_bytes_.end()) estimate = k->second;
  }
  if (estimate == 0 && estimate_bytes) estimate = estimate_bytes();
  check_fits_alone(component, estimate, "estimated from its files");
  {
    std::lock_guard lock(mutex_);
    evict_to_fit(estimate, nullptr);
  }
  backend::release_cached_memory(device_);  // evicted blocks back to the device before the load

  int64_t before = backend::memory_stats(device_).live_bytes;
  std::shared_ptr<void> value;
  try {
    value = load();
  } catch (const OutOfMemory& e) {
    // The device is full of models no generation uses now: give them back and try once more.
    if (evict_unleased(str("to retry loading the ", component, " after: ", e.what())) == 0) throw;
    before = backend::memory_stats(device_).live_bytes;
    value = load();
  }
  const int64_t measured = backend::memory_stats(device_).live_bytes - before;
  const int64_t bytes = measured > 0 ? measured : estimate;
  check_fits_alone(component, bytes, "measured while loading");  // `value` is freed on the throw

  std::lock_guard lock(mutex_);
  entries_.push_back({component, key, value, bytes});
  known_bytes_[key] = bytes;
  used_ += bytes;
  ComponentStats& c = counts_[component];
  c.loads += 1;
  c.bytes += bytes;
  c.entries += 1;
  evict_to_fit(0, &entries_.back());
  if (budget_ > 0 && used_ > budget_)
    log_warn("model cache: ", mib(used_), " resident, above the budget of ", mib(budget_),
             ", because the running generation holds the other models; they go when it ends");
  return value;
}

void ModelCache::clear() {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->value.use_count() > 1) {
      ++it;
      continue;
    }
    used_ -= it->bytes;
    ComponentStats& c = counts_[it->component];
    c.bytes -= it->bytes;
    c.entries -= 1;
    it = entries_.erase(it);
  }
  backend::release_cached_memory(device_);
}

ModelCache::Stats ModelCache::stats() const {
  std::lock_guard lock(mutex_);
  Stats s;
  s.budget_bytes = budget_;
  s.components = counts_;
  for (const auto& [name, c] : counts_) {
    s.loads += c.loads;
    s.evictions += c.evictions;
    s.bytes += c.bytes;
    s.entries += c.entries;
  }
  return s;
}

}  // namespace ltx::generate
