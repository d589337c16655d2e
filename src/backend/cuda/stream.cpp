#include "backend/cuda/stream.h"

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/cuda/device.h"
#include "core/error.h"

namespace ltx::cuda {

namespace {

// One default stream per device, created lazily and deliberately never destroyed: tensors that
// outlive main() may still reference it from the allocator during static destruction.
struct DefaultStreams {
  std::mutex mu;
  std::vector<cudaStream_t> streams;
};

DefaultStreams& default_streams() {
  static DefaultStreams* ds = new DefaultStreams();
  return *ds;
}

DefaultStreams& side_streams() {
  static DefaultStreams* ds = new DefaultStreams();
  return *ds;
}

// Per-thread current stream for each device; nullptr means "the device's default stream".
std::vector<cudaStream_t>& thread_streams() {
  thread_local std::vector<cudaStream_t> v;
  return v;
}

}  // namespace

void Stream::synchronize() const {
  DeviceGuard guard(device_);
  LTX_CUDA_CHECK(cudaStreamSynchronize(handle_));
}

bool Stream::query() const {
  DeviceGuard guard(device_);
  const cudaError_t err = cudaStreamQuery(handle_);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  LTX_CUDA_CHECK(err);
  return true;
}

namespace {

// `device`'s stream in `table`, created on first use (non-blocking; at the device's highest
// priority when asked, else the default one).
Stream process_stream(DefaultStreams& table, int device, bool highest_priority, const char* what) {
  check_device(device, what);
  std::lock_guard<std::mutex> lock(table.mu);
  if (table.streams.empty()) table.streams.assign(static_cast<size_t>(device_count()), nullptr);
  cudaStream_t& s = table.streams[static_cast<size_t>(device)];
  if (s == nullptr) {
    DeviceGuard guard(device);
    int least = 0, greatest = 0;
    if (highest_priority) LTX_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    LTX_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking,
                                                highest_priority ? greatest : 0));
  }
  return Stream(s, device);
}

}  // namespace

Stream default_stream(int device) {
  return process_stream(default_streams(), device, false, "default_stream");
}

Stream side_stream(int device) { return process_stream(side_streams(), device, true, "side_stream"); }

bool is_capturing(Stream s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  LTX_CUDA_CHECK(cudaStreamIsCapturing(s.handle(), &status));
  return status != cudaStreamCaptureStatusNone;
}

Stream current_stream(int device) {
  if (device < 0) device = current_device();
  check_device(device, "current_stream");
  auto& ts = thread_streams();
  if (static_cast<size_t>(device) < ts.size() && ts[static_cast<size_t>(device)] != nullptr)
    return Stream(ts[static_cast<size_t>(device)], device);
  return default_stream(device);
}

void set_current_stream(Stream s) {
  check_device(s.device(), "set_current_stream");
  auto& ts = thread_streams();
  if (ts.size() < static_cast<size_t>(device_count()))
    ts.resize(static_cast<size_t>(device_count()), nullptr);
  ts[static_cast<size_t>(s.device())] = s.handle();
}

StreamGuard::StreamGuard(Stream s)
    : previous_stream_(current_stream(s.device())), previous_device_(current_device()) {
  set_current_stream(s);
  if (previous_device_ != s.device()) set_device(s.device());
}

StreamGuard::~StreamGuard() {
  auto& ts = thread_streams();
  ts[static_cast<size_t>(previous_stream_.device())] = previous_stream_.handle();
  if (previous_device_ != previous_stream_.device()) (void)cudaSetDevice(previous_device_);
}

OwnedStream::OwnedStream(int device) {
  DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  LTX_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = Stream(s, device);
}

OwnedStream::~OwnedStream() {
  const int prev = [] {
    int d = 0;
    return cudaGetDevice(&d) == cudaSuccess ? d : -1;
  }();
  (void)cudaSetDevice(stream_.device());
  (void)cudaStreamSynchronize(stream_.handle());
  (void)cudaStreamDestroy(stream_.handle());
  if (prev >= 0) (void)cudaSetDevice(prev);
}

Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(event_);
}

Event::Event(Event&& o) noexcept
    : event_(std::exchange(o.event_, nullptr)), device_(o.device_) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
    event_ = std::exchange(o.event_, nullptr);
    device_ = o.device_;
  }
  return *this;
}

void Event::record(Stream s) {
  DeviceGuard guard(s.device());
  if (event_ != nullptr && device_ != s.device()) {
    (void)cudaEventDestroy(event_);
    event_ = nullptr;
  }
  if (event_ == nullptr) {
    LTX_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    device_ = s.device();
  }
  LTX_CUDA_CHECK(cudaEventRecord(event_, s.handle()));
}

void Event::wait(Stream s) const {
  if (event_ == nullptr) return;
  DeviceGuard guard(s.device());
  LTX_CUDA_CHECK(cudaStreamWaitEvent(s.handle(), event_, 0));
}

void Event::synchronize() const {
  if (event_ == nullptr) return;
  LTX_CUDA_CHECK(cudaEventSynchronize(event_));
}

bool Event::query() const {
  if (event_ == nullptr) return true;
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  LTX_CUDA_CHECK(err);
  return true;
}

}  // namespace ltx::cuda
