#pragma once
// Stopping long work cleanly (a generation on Ctrl-C or SIGTERM; a server's cancelled job): whoever
// wants it stopped calls request(), the work calls check() at its stage and step boundaries and
// unwinds with Cancelled, so every owner cleans up as on any error (temporary outputs removed,
// device memory returned). Never a killed thread, never a half-written file.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace ltx {

// The error a cancelled piece of work ends with; reason() is what request() was given (e.g. the
// signal number).
class Cancelled : public Error {
 public:
  Cancelled(const std::string& message, int reason) : Error(message), reason_(reason) {}
  int reason() const { return reason_; }

 private:
  int reason_;
};

// The Cancelled of work that ran past its deadline (a server job's timeout), so callers can tell
// "timed out" from "stopped on request".
class DeadlineExceeded : public Cancelled {
 public:
  static constexpr int kReason = -1;  // never a signal number
  explicit DeadlineExceeded(const std::string& message) : Cancelled(message, kReason) {}
};

// A point in time after which work stops at its next boundary, like a requested cancellation.
struct Deadline {
  using Clock = std::chrono::steady_clock;
  Clock::time_point at;
  double seconds = 0.0;  // the timeout it was made from, for the message

  // `seconds` from now.
  static Deadline after(double seconds) {
    return {Clock::now() + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(seconds)),
            seconds};
  }
  bool passed() const { return Clock::now() >= at; }
  // Throws DeadlineExceeded ("timed out after 30 s, during <where>") once the deadline passed.
  void check(const std::string& where) const {
    if (!passed()) return;
    char n[32];
    std::snprintf(n, sizeof n, "%g", seconds);
    throw DeadlineExceeded(std::string("timed out after ") + n + " s, during " + where);
  }
};

class CancelToken {
 public:
  // Safe in a signal handler: one store to a lock-free atomic. `reason` must not be 0.
  void request(int reason) noexcept { reason_.store(reason, std::memory_order_relaxed); }
  bool requested() const noexcept { return reason_.load(std::memory_order_relaxed) != 0; }
  int reason() const noexcept { return reason_.load(std::memory_order_relaxed); }
  // Throws Cancelled ("cancelled during <where>") once request() was called.
  void check(const std::string& where) const {
    if (const int r = reason(); r != 0) throw Cancelled("cancelled during " + where, r);
  }

 private:
  static_assert(std::atomic<int>::is_always_lock_free);
  std::atomic<int> reason_{0};
};

}  // namespace ltx
