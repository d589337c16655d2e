#include "generate/sink_thread.h"

#include <chrono>
#include <utility>

namespace ltx::generate {

namespace {
using Clock = std::chrono::steady_clock;
double wall_seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

SinkThread::SinkThread(MediaSink& inner) : inner_(inner), thread_([this] { loop(); }) {}

SinkThread::~SinkThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  work_cv_.notify_all();
  thread_.join();
}

void SinkThread::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopped
    std::function<void()> call = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    const Clock::time_point t0 = Clock::now();
    std::exception_ptr failed;
    try {
      call();
    } catch (...) {
      failed = std::current_exception();
    }
    call = nullptr;  // drop the chunk it held before the caller may make the next one
    lock.lock();
    busy_seconds_ += wall_seconds_since(t0);
    running_ = false;
    if (failed && !error_) {
      error_ = failed;
      queue_.clear();  // nothing after a failed call makes sense to the inner sink
    }
    idle_cv_.notify_all();
  }
}

void SinkThread::wait_idle(std::unique_lock<std::mutex>& lock) {
  const Clock::time_point t0 = Clock::now();
  idle_cv_.wait(lock, [&] { return error_ || (queue_.empty() && !running_); });
  wait_seconds_ += wall_seconds_since(t0);
  if (error_) std::rethrow_exception(error_);
}

void SinkThread::post(std::function<void()> call, bool wait_for_idle) {
  std::unique_lock<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
  if (wait_for_idle) wait_idle(lock);
  queue_.push_back(std::move(call));
  lock.unlock();
  work_cv_.notify_one();
}

void SinkThread::begin(const MediaFormat& format) {
  post([this, format] { inner_.begin(format); }, false);
}

void SinkThread::write_frames(const Tensor& frames) {
  post([this, frames] { inner_.write_frames(frames); }, true);
}

void SinkThread::write_audio(const Tensor& waveform) {
  post([this, waveform] { inner_.write_audio(waveform); }, false);
}

void SinkThread::finish() {
  post([this] { inner_.finish(); }, false);
  std::unique_lock<std::mutex> lock(mu_);
  wait_idle(lock);
}

double SinkThread::busy_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_seconds_;
}

double SinkThread::wait_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wait_seconds_;
}

}  // namespace ltx::generate
