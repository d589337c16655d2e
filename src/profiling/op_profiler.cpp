#include "profiling/op_profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/op_observer.h"
#if LTX_WITH_CUDA
#include "backend/cuda/device.h"
#include "backend/cuda/stream.h"
#endif

namespace ltx::profiling {

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

// LTX_PROFILE_OPS=events: instead of synchronising, each outermost op records a start and an end
// CUDA event on the current stream; the GPU timeline (op spans and the gaps between ops, where
// the GPU ran something outside an op or sat idle) is read back at exit.
using Mode = env::OpProfiling;

#if LTX_WITH_CUDA
struct TimedOp {
  std::string name;  // copied: some scopes pass a temporary's characters
  cudaEvent_t start, end;
};
#endif

// Leaked on purpose so ops running during static destruction still find it.
struct Profile {
  std::mutex mu;
  std::map<std::string, Entry> ops;
  double first = -1.0, last = 0.0;
#if LTX_WITH_CUDA
  std::vector<TimedOp> timeline;  // events mode, in issue order
#endif
};

Profile* the_profile = nullptr;

#if LTX_WITH_CUDA
// Events mode: op spans from their events; the gaps between consecutive ops (largest first, with
// their neighbours) show GPU time spent outside ops.
void fold_timeline(Profile& pr) {
  if (pr.timeline.empty()) return;
  sync_gpus();
  struct Gap {
    float ms;
    size_t after;
  };
  std::vector<Gap> gaps;
  double between = 0.0;
  for (size_t i = 0; i < pr.timeline.size(); ++i) {
    const TimedOp& t = pr.timeline[i];
    float ms = 0.f;
    if (cudaEventElapsedTime(&ms, t.start, t.end) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    Entry& e = pr.ops[t.name];
    e.seconds += ms * 1e-3;
    ++e.calls;
    if (i > 0) {
      float g = 0.f;
      if (cudaEventElapsedTime(&g, pr.timeline[i - 1].end, t.start) == cudaSuccess) {
        between += g * 1e-3;
        gaps.push_back({g, i - 1});
      } else {
        (void)cudaGetLastError();
      }
    }
  }
  float span_ms = 0.f;
  if (cudaEventElapsedTime(&span_ms, pr.timeline.front().start, pr.timeline.back().end) == cudaSuccess) {
    pr.first = 0.0;
    pr.last = span_ms * 1e-3;
  }
  std::sort(gaps.begin(), gaps.end(), [](const Gap& a, const Gap& b) { return a.ms > b.ms; });
  std::fprintf(stderr, "\nLTX_PROFILE_OPS=events: %.1f ms of GPU time between ops; the largest gaps:\n",
               between * 1e3);
  for (size_t i = 0; i < std::min<size_t>(gaps.size(), 12); ++i)
    std::fprintf(stderr, "  %10.3f ms after op #%zu %-28s before %s\n", gaps[i].ms, gaps[i].after,
                 pr.timeline[gaps[i].after].name.c_str(), pr.timeline[gaps[i].after + 1].name.c_str());
}
#endif

void print_profile() {
  Profile& pr = *the_profile;
  std::lock_guard<std::mutex> lock(pr.mu);
#if LTX_WITH_CUDA
  fold_timeline(pr);
#endif
  std::vector<std::pair<std::string, Entry>> rows(pr.ops.begin(), pr.ops.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0.0;
  for (const auto& r : rows) total += r.second.seconds;
  const double span = pr.first < 0 ? 0.0 : pr.last - pr.first;
  std::fprintf(stderr,
               "\nLTX_PROFILE_OPS: GPU time per op (synchronised; %.1f ms in ops over a %.1f ms span)\n",
               total * 1e3, span * 1e3);
  std::fprintf(stderr, "%-48s %12s %10s %7s\n", "op", "total ms", "calls", "share");
  constexpr size_t kMaxRows = 80;  // ops split by shape can make hundreds of rows
  for (size_t i = 0; i < std::min(rows.size(), kMaxRows); ++i) {
    const auto& [name, e] = rows[i];
    std::fprintf(stderr, "%-48s %12.2f %10ld %6.1f%%\n", name.c_str(), e.seconds * 1e3, e.calls,
                 span > 0 ? 100.0 * e.seconds / span : 0.0);
  }
  if (rows.size() > kMaxRows) {
    double rest = 0.0;
    for (size_t i = kMaxRows; i < rows.size(); ++i) rest += rows[i].second.seconds;
    std::fprintf(stderr, "(%zu more rows) %33s %12.2f\n", rows.size() - kMaxRows, "", rest * 1e3);
  }
  if (span > 0)
    std::fprintf(stderr, "%-48s %12.2f %10s %6.1f%%\n", "(outside ops: copies, host)",
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

// The outermost op open on this thread (only it is recorded; nested ops count inside it).
struct OpenOp {
  const char* op = nullptr;  // null: not recording (an event could not be recorded)
  std::string detail;        // OpObserver::detail's text, if any
  double start = 0.0;
#if LTX_WITH_CUDA
  cudaEvent_t start_event = nullptr, end_event = nullptr;  // events mode
#endif
};

thread_local int depth = 0;
thread_local OpenOp open_op;

class OpProfiler final : public OpObserver {
 public:
  explicit OpProfiler(Mode mode) : mode_(mode) {}

  void begin(const char* op) override {
    if (depth++ > 0) return;
    open_op = OpenOp{};
    open_op.op = op;
#if LTX_WITH_CUDA
    if (mode_ == Mode::Events) {
      const bool ok =
          cudaEventCreate(&open_op.start_event) == cudaSuccess &&
          cudaEventCreate(&open_op.end_event) == cudaSuccess &&
          cudaEventRecord(open_op.start_event, cuda::current_stream().handle()) == cudaSuccess;
      if (!ok) {
        (void)cudaGetLastError();
        open_op.op = nullptr;
      }
      return;
    }
#endif
    sync_gpus();
    open_op.start = now_s();
  }

  void detail(const std::string& text) override {
    if (depth > 0 && open_op.op != nullptr) open_op.detail += " " + text;
  }

  void end() override {
    if (--depth > 0 || open_op.op == nullptr) return;
    const std::string name =
        open_op.detail.empty() ? std::string(open_op.op) : open_op.op + open_op.detail;
    open_op.op = nullptr;
#if LTX_WITH_CUDA
    if (mode_ == Mode::Events) {
      if (cudaEventRecord(open_op.end_event, cuda::current_stream().handle()) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
      }
      Profile& p = profile();
      std::lock_guard<std::mutex> lock(p.mu);
      p.timeline.push_back({name, open_op.start_event, open_op.end_event});
      return;
    }
#endif
    sync_gpus();
    const double end = now_s();
    Profile& p = profile();
    std::lock_guard<std::mutex> lock(p.mu);
    Entry& e = p.ops[name];
    e.seconds += end - open_op.start;
    ++e.calls;
    if (p.first < 0) p.first = open_op.start;
    p.last = end;
  }

 private:
  [[maybe_unused]] const Mode mode_;  // Events needs CUDA
};

bool installed = false;

}  // namespace

void install_op_profiler(env::OpProfiling mode) {
  if (mode == Mode::Off) return;
  LTX_CHECK(!installed, "install_op_profiler: an op profiler is already installed");
  installed = true;
  // Leaked on purpose, like the profile: ops may run during static destruction.
  set_op_observer(new OpProfiler(mode));
}

void reset_op_profile() {
  if (!installed) return;
  sync_gpus();
  Profile& p = profile();
  std::lock_guard<std::mutex> lock(p.mu);
  p.ops.clear();
  p.first = -1.0;
  p.last = 0.0;
#if LTX_WITH_CUDA
  for (const TimedOp& t : p.timeline) {
    (void)cudaEventDestroy(t.start);
    (void)cudaEventDestroy(t.end);
  }
  p.timeline.clear();
#endif
}

}  // namespace ltx::profiling
