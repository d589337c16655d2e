#pragma once
// Streams and events. Every kernel, copy and GEMM of the backend is enqueued on the calling
// thread's *current stream* of the device it runs on, asynchronously; the host waits only where it
// needs a value (device -> host copies). The default current stream of each device is one
// process-wide non-blocking stream created on first use (it does not synchronise with the legacy
// NULL stream), so work from different threads is ordered unless a thread switches streams with
// StreamGuard. Ordering between streams is the caller's job: record an Event on one, wait on the
// other (and tell the allocator with record_stream when memory crosses streams).
#include <cuda_runtime.h>

namespace ltx::cuda {

// A non-owning handle: a cudaStream_t plus the device it belongs to.
class Stream {
 public:
  Stream() = default;
  Stream(cudaStream_t handle, int device) : handle_(handle), device_(device) {}
  cudaStream_t handle() const { return handle_; }
  int device() const { return device_; }
  bool operator==(const Stream& o) const { return handle_ == o.handle_ && device_ == o.device_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }
  // Blocks the host until all work enqueued so far has finished.
  void synchronize() const;
  // True when all work enqueued so far has finished (does not block).
  bool query() const;

 private:
  cudaStream_t handle_ = nullptr;
  int device_ = 0;
};

// The process-wide default stream of `device` (non-blocking, created on first use, never
// destroyed).
Stream default_stream(int device);
// A second process-wide stream of `device` for work that runs beside the current stream's
// (backend/stream_fork.h): non-blocking, at the device's highest priority so that its small
// kernels are scheduled as soon as SMs free up. Created on first use, never destroyed.
Stream side_stream(int device);
// True when `s` is being captured into a CUDA graph.
bool is_capturing(Stream s);
// The calling thread's current stream on `device` (-1: the current device).
Stream current_stream(int device = -1);
// Makes `s` the calling thread's current stream on s.device().
void set_current_stream(Stream s);

// Makes `s` the current stream (and s.device() the current device) for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(Stream s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_stream_;
  int previous_device_;
};

// A stream owned by its creator (non-blocking). The destructor waits for the stream's work before
// destroying it, so memory the allocator cached for it can be reused safely afterwards.
class OwnedStream {
 public:
  explicit OwnedStream(int device);
  ~OwnedStream();
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  Stream get() const { return stream_; }

 private:
  Stream stream_;
};

// A CUDA event without timing, for ordering work across streams (and for the allocator).
class Event {
 public:
  Event() = default;
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Captures the work enqueued on `s` so far (creates the event on s.device() on first use).
  void record(Stream s);
  // Makes future work on `s` wait for the recorded work (no host wait). No-op before record().
  void wait(Stream s) const;
  // Blocks the host until the recorded work has finished. No-op before record().
  void synchronize() const;
  // True when the recorded work has finished (or nothing was recorded).
  bool query() const;
  bool recorded() const { return event_ != nullptr; }

 private:
  cudaEvent_t event_ = nullptr;
  int device_ = 0;
};

}  // namespace ltx::cuda
