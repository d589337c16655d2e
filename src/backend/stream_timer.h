#pragma once
// The span of a piece of work that runs on its own stream beside other work (the decode's audio
// beside its video), where the host cannot see when it ran: on a GPU two timing events recorded on
// the calling thread's current stream at start() and stop(), so the span is from when the stream
// reached start() to when it reached stop(); on the CPU, whose ops run as they are called, the host
// clock between the two calls.
#include <memory>

#include "core/device.h"

namespace ltx::backend {

class StreamTimer {
 public:
  explicit StreamTimer(Device device);
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  void start();
  void stop();
  // The span in seconds; on a GPU it waits for the stream to reach stop(). 0 before both ends
  // were marked.
  double seconds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ltx::backend
