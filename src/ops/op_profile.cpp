#include "ops/op_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#if LTX_WITH_CUDA
#include "backend/cuda/device.h"
#endif

namespace ltx::ops {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void sync_gpus() {
#if LTX_WITH_CUDA
  for (int i = 0; i < cuda::device_count(); ++i) cuda::synchronize(i);
#endif
}

struct Entry {
  double seconds = 0.0;
  long calls = 0;
};

// Leaked on purpose so ops running during static destruction still find it.
struct Profile {
  std::mutex mu;
  std::map<std::string, Entry> ops;
  double first = -1.0, last = 0.0;
};

Profile* the_profile = nullptr;

void print_profile() {
  Profile& pr = *the_profile;
  std::lock_guard<std::mutex> lock(pr.mu);
  std::vector<std::pair<std::string, Entry>> rows(pr.ops.begin(), pr.ops.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0.0;
  for (const auto& r : rows) total += r.second.seconds;
  const double span = pr.first < 0 ? 0.0 : pr.last - pr.first;
  std::fprintf(stderr,
               "\nLTX_PROFILE_OPS: GPU time per op (synchronised; %.1f ms in ops over a %.1f ms span)\n",
               total * 1e3, span * 1e3);
  std::fprintf(stderr, "%-32s %12s %10s %7s\n", "op", "total ms", "calls", "share");
  for (const auto& [name, e] : rows)
    std::fprintf(stderr, "%-32s %12.2f %10ld %6.1f%%\n", name.c_str(), e.seconds * 1e3, e.calls,
                 span > 0 ? 100.0 * e.seconds / span : 0.0);
  if (span > 0)
    std::fprintf(stderr, "%-32s %12.2f %10s %6.1f%%\n", "(outside ops: copies, host)",
                 (span - total) * 1e3, "", 100.0 * (span - total) / span);
}

Profile& profile() {
  static Profile* p = [] {
    the_profile = new Profile();
    std::atexit(print_profile);
    return the_profile;
  }();
  return *p;
}

thread_local int depth = 0;

}  // namespace

bool op_profiling_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("LTX_PROFILE_OPS");
    return e != nullptr && std::strcmp(e, "0") != 0 && e[0] != '\0';
  }();
  return on;
}

OpProfileScope::OpProfileScope(const char* op) {
  if (!op_profiling_enabled() || depth++ > 0) return;
  sync_gpus();
  op_ = op;
  start_ = now_s();
}

OpProfileScope::~OpProfileScope() {
  if (!op_profiling_enabled()) return;
  --depth;
  if (op_ == nullptr) return;
  sync_gpus();
  const double end = now_s();
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  Entry& e = p.ops[op_];
  e.seconds += end - start_;
  ++e.calls;
  if (p.first < 0) p.first = start_;
  p.last = end;
}

}  // namespace ltx::ops
