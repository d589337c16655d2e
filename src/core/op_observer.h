#pragma once
// A seam for watching ops run without the engine knowing who watches: the CUDA dispatch of every
// op (LTX_CUDA_DISPATCH, ops/dispatch.h) and the CUDA backend's device copies open an OpScope
// around their work, and the process's observer, if one is installed, hears each scope begin and
// end. `ltx` installs its op profiler here when LTX_PROFILE_OPS is set (src/profiling/); nothing
// is installed by default, and then a scope costs one load and one predictable branch.
#include <atomic>
#include <string>

namespace ltx {

class OpObserver {
 public:
  virtual ~OpObserver() = default;
  // An op starts on the calling thread. Scopes nest (a fused op may call other ops).
  virtual void begin(const char* op) = 0;
  // More of the name the current op is counted under (e.g. a GEMM's sizes).
  virtual void detail(const std::string& text) = 0;
  // The op this thread began last ends.
  virtual void end() = 0;
};

namespace detail {
inline std::atomic<OpObserver*> g_op_observer{nullptr};
}

// Installs `observer` for the whole process (null: none). Install it before ops run and keep it
// alive for as long as ops may run: a scope reports its end to the observer it began with.
inline void set_op_observer(OpObserver* observer) {
  detail::g_op_observer.store(observer, std::memory_order_release);
}

inline OpObserver* op_observer() { return detail::g_op_observer.load(std::memory_order_acquire); }

class OpScope {
 public:
  explicit OpScope(const char* op) : observer_(op_observer()) {
    if (observer_ != nullptr) observer_->begin(op);
  }
  ~OpScope() {
    if (observer_ != nullptr) observer_->end();
  }
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;

  // Whether an observer hears this scope: build detail text only then.
  bool observed() const { return observer_ != nullptr; }
  void detail(const std::string& text) const {
    if (observer_ != nullptr) observer_->detail(text);
  }

 private:
  OpObserver* const observer_;
};

}  // namespace ltx
