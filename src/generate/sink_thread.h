#pragma once
// A MediaSink that makes its calls into another sink on a thread of its own, in the order they
// came, so that the caller goes on while the other sink works: the video decode hands a chunk to
// the MP4 writer (colour conversion + H.264) and decodes the next chunk meanwhile.
//   - Memory: write_frames returns once the thread has finished every earlier call and taken this
//     one, so the host holds at most two chunks (the one being written, the next one the caller
//     has made) where an in-line sink held one.
//   - Errors: the first exception of the thread's calls (an encoder failure, a full disk) is kept,
//     the calls queued after it are dropped, and the caller's next call rethrows it (finish() at
//     the latest), so it ends the job as its own error would.
//   - finish() returns once the inner finish() ran (the file is in place).
//   - Destroyed without a successful finish() (the decode failed or was cancelled): the queued
//     calls are dropped, the call in progress runs to its end, the inner sink is never finished
//     (an Mp4Sink then leaves no file when its owner drops it).
// The frames and waveforms handed over must not be written by the caller afterwards (the decode's
// chunks are fresh host tensors).
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "generate/decode.h"

namespace ltx::generate {

class SinkThread final : public MediaSink {
 public:
  explicit SinkThread(MediaSink& inner);
  ~SinkThread() override;
  SinkThread(const SinkThread&) = delete;
  SinkThread& operator=(const SinkThread&) = delete;

  void begin(const MediaFormat& format) override;
  void write_frames(const Tensor& frames) override;
  void write_audio(const Tensor& waveform) override;
  void finish() override;

  // Seconds the thread spent inside the inner sink's calls.
  double busy_seconds() const;
  // Seconds the caller waited for the thread (in write_frames and finish).
  double wait_seconds() const;

 private:
  MediaSink& inner_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<std::function<void()>> queue_;
  bool running_ = false;  // a call is in progress on the thread
  bool stop_ = false;
  std::exception_ptr error_;
  double busy_seconds_ = 0, wait_seconds_ = 0;
  std::thread thread_;

  void loop();
  // Queues `call`; with `wait_idle`, first waits until the thread finished every earlier call.
  void post(std::function<void()> call, bool wait_idle);
  // Waits (lock held) until the thread is idle or failed; rethrows its error.
  void wait_idle(std::unique_lock<std::mutex>& lock);
};

}  // namespace ltx::generate
