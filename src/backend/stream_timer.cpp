#include "backend/stream_timer.h"

#include <chrono>

#include "backend/device_query.h"
#include "core/error.h"
#if LTX_WITH_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/device.h"
#include "backend/cuda/stream.h"
#endif

namespace ltx::backend {

struct StreamTimer::Impl {
  Device device;
  bool started = false, stopped = false;
  std::chrono::steady_clock::time_point host_start, host_stop;
#if LTX_WITH_CUDA
  cudaEvent_t start = nullptr, stop = nullptr;
#endif
};

StreamTimer::StreamTimer(Device device) : impl_(std::make_unique<Impl>()) {
  check_device(device);
  impl_->device = device;
#if LTX_WITH_CUDA
  if (device.is_cuda()) {
    cuda::DeviceGuard guard(device.index);
    LTX_CUDA_CHECK(cudaEventCreate(&impl_->start));
    if (cudaEventCreate(&impl_->stop) != cudaSuccess) {
      (void)cudaGetLastError();
      cudaEventDestroy(impl_->start);
      fail("stream timer: cudaEventCreate failed on ", device.str());
    }
  }
#endif
}

StreamTimer::~StreamTimer() {
#if LTX_WITH_CUDA
  if (impl_->start != nullptr) {
    cuda::DeviceGuard guard(impl_->device.index);
    cudaEventDestroy(impl_->start);
    cudaEventDestroy(impl_->stop);
  }
#endif
}

void StreamTimer::start() {
  impl_->started = true;
  impl_->stopped = false;
#if LTX_WITH_CUDA
  if (impl_->start != nullptr) {
    LTX_CUDA_CHECK(cudaEventRecord(impl_->start, cuda::current_stream(impl_->device.index).handle()));
    return;
  }
#endif
  impl_->host_start = std::chrono::steady_clock::now();
}

void StreamTimer::stop() {
  LTX_CHECK(impl_->started, "stream timer: stop() before start()");
  impl_->stopped = true;
#if LTX_WITH_CUDA
  if (impl_->stop != nullptr) {
    LTX_CUDA_CHECK(cudaEventRecord(impl_->stop, cuda::current_stream(impl_->device.index).handle()));
    return;
  }
#endif
  impl_->host_stop = std::chrono::steady_clock::now();
}

double StreamTimer::seconds() const {
  if (!impl_->started || !impl_->stopped) return 0.0;
#if LTX_WITH_CUDA
  if (impl_->stop != nullptr) {
    cuda::DeviceGuard guard(impl_->device.index);
    LTX_CUDA_CHECK(cudaEventSynchronize(impl_->stop));
    float ms = 0.f;
    LTX_CUDA_CHECK(cudaEventElapsedTime(&ms, impl_->start, impl_->stop));
    return static_cast<double>(ms) / 1000.0;
  }
#endif
  return std::chrono::duration<double>(impl_->host_stop - impl_->host_start).count();
}

}  // namespace ltx::backend
