#include "backend/stream_fork.h"

#include <atomic>

#include "core/env_settings.h"
#include "core/log.h"
#if LTX_WITH_CUDA
#include "backend/cuda/allocator.h"
#include "backend/cuda/stream.h"
#endif

namespace ltx::backend {

namespace {

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> flag = env::settings().side_streams;
  return flag;
}

}  // namespace

bool side_streams_enabled() { return enabled_flag().load(); }
void set_side_streams_enabled(bool enabled) { enabled_flag().store(enabled); }

struct StreamFork::Impl {
#if LTX_WITH_CUDA
  bool active = false;
  cuda::Stream main, side;
  cuda::Event to_side, to_main;  // main -> side (fork), side -> main (join)
  bool side_pending = false;     // side work issued since the last join
#endif
};

StreamFork::StreamFork(Device device) : impl_(std::make_unique<Impl>()) {
#if LTX_WITH_CUDA
  if (!device.is_cuda() || !side_streams_enabled()) return;
  impl_->main = cuda::current_stream(device.index);
  // A graph capture records the main stream only (cuda/graph.h); the allocator's cross-stream
  // events cannot be part of one.
  if (cuda::is_capturing(impl_->main)) return;
  impl_->side = cuda::side_stream(device.index);
  impl_->active = impl_->side != impl_->main;
#else
  (void)device;
#endif
}

StreamFork::~StreamFork() {
  try {
    join();
  } catch (const std::exception& e) {
    log_warn("stream fork: the final join failed: ", e.what());
  }
}

bool StreamFork::active() const {
#if LTX_WITH_CUDA
  return impl_->active;
#else
  return false;
#endif
}

void StreamFork::fork() {
#if LTX_WITH_CUDA
  if (!impl_->active) return;
  impl_->to_side.record(impl_->main);
  impl_->to_side.wait(impl_->side);
#endif
}

void StreamFork::join() {
#if LTX_WITH_CUDA
  if (!impl_->active || !impl_->side_pending) return;
  impl_->to_main.record(impl_->side);
  impl_->to_main.wait(impl_->main);
  impl_->side_pending = false;
#endif
}

void StreamFork::on_side(const std::function<void()>& f) {
#if LTX_WITH_CUDA
  if (impl_->active) {
    cuda::StreamGuard guard(impl_->side);
    impl_->side_pending = true;
    f();
    return;
  }
#endif
  f();
}

void StreamFork::read_on_side(const Tensor& made_on_main) { read_on(made_on_main, true); }
void StreamFork::read_on_main(const Tensor& made_on_side) { read_on(made_on_side, false); }

void StreamFork::read_on(const Tensor& t, bool side) {
#if LTX_WITH_CUDA
  if (impl_->active && t.defined() && t.device().is_cuda())
    cuda::record_stream(t.storage()->data(), side ? impl_->side : impl_->main);
#else
  (void)t;
  (void)side;
#endif
}

}  // namespace ltx::backend
