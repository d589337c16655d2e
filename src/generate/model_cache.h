#pragma once
// Models kept loaded between generations, within a memory budget (the resident engine,
// generate/engine.h).
//
// An entry is one loaded component (a transformer, a decoder, ...) under a key that names the
// component, its file(s) and its load options. acquire() returns the entry, loading it on a miss;
// the pointer it returns is a lease: while any lease of an entry lives, the entry is never
// evicted. Before a load, unleased entries are evicted least recently used first until the
// estimated size fits the budget; after it, the entry's measured size (the growth of
// backend::memory_stats(device).live_bytes during the load) replaces the estimate, and more
// entries go if the budget is exceeded. A component larger than the whole budget is an error
// naming it, its size and the budget.
//
// A load that fails with ltx::OutOfMemory while unleased entries are resident is retried once
// after every unleased entry is evicted (least recently used first); a second failure, or one
// with nothing to evict, reaches the caller.
//
// Sizes on the CPU count the memory the loaders allocate; weights used in place from a file's
// read-only mapping (f32 files on the CPU) are not allocations, so such an entry is counted at its
// header estimate.
//
// acquire() and clear() are for one thread at a time (the engine's); stats() may be called from
// any thread.
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device.h"

namespace ltx::generate {

class ModelCache {
 public:
  // budget_bytes 0: no limit. `budget_option`: how the user sets the budget (for messages).
  ModelCache(Device device, int64_t budget_bytes,
             std::string budget_option = "--model-memory-budget");
  ~ModelCache();
  ModelCache(const ModelCache&) = delete;
  ModelCache& operator=(const ModelCache&) = delete;

  // The entry of `component` under `key`, loading it with `load` on a miss. `estimate_bytes`
  // (0: unknown) is called only on a miss, before the load.
  template <class T>
  std::shared_ptr<T> acquire(const std::string& component, const std::string& key,
                             const std::function<int64_t()>& estimate_bytes,
                             const std::function<std::shared_ptr<T>()>& load) {
    // Stored type-erased (const dropped for the erasure only; it comes back as T).
    return std::static_pointer_cast<T>(
        acquire_entry(component, key, estimate_bytes, [&]() -> std::shared_ptr<void> {
          return std::const_pointer_cast<std::remove_const_t<T>>(load());
        }));
  }

  struct ComponentStats {
    int64_t loads = 0;      // misses that loaded it
    int64_t evictions = 0;  // entries of it evicted to fit the budget
    int64_t bytes = 0;      // resident now
    int64_t entries = 0;    // resident now
  };
  struct Stats {
    int64_t loads = 0, evictions = 0, bytes = 0, entries = 0, budget_bytes = 0;
    std::map<std::string, ComponentStats> components;
  };
  Stats stats() const;

  // Evicts every unleased entry (e.g. to give the device's memory back while idle).
  void clear();
  // Evicts every unleased entry, least recently used first, counting each as an eviction and
  // logging why (`reason`); returns how many went. The device's cached blocks go back too.
  int64_t evict_unleased(const std::string& reason);
  Device device() const { return device_; }
  int64_t budget_bytes() const { return budget_; }

 private:
  struct Entry {
    std::string component, key;
    std::shared_ptr<void> value;
    int64_t bytes = 0;
  };
  Device device_;
  int64_t budget_;
  std::string budget_option_;
  mutable std::mutex mutex_;  // guards the members below (stats() from other threads)
  std::list<Entry> entries_;  // least recently used first
  std::map<std::string, int64_t> known_bytes_;  // measured sizes by key, kept after eviction
  std::map<std::string, ComponentStats> counts_;
  int64_t used_ = 0;

  std::shared_ptr<void> acquire_entry(const std::string& component, const std::string& key,
                                      const std::function<int64_t()>& estimate_bytes,
                                      const std::function<std::shared_ptr<void>()>& load);
  // Evicts unleased entries, least recently used first (never `keep`), until used + incoming <=
  // the budget or none is left to evict.
  void evict_to_fit(int64_t incoming, const Entry* keep);
  // Removes the entry at `it` (under mutex_), counting an eviction; the next entry.
  std::list<Entry>::iterator evict(std::list<Entry>::iterator it, const std::string& why);
  void check_fits_alone(const std::string& component, int64_t bytes, const char* how) const;
};

}  // namespace ltx::generate
