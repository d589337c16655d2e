#pragma once
// Helpers of the scheduler tests: bounded waits and a listener that records every call.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/job.h"
#include "server/scheduler.h"

namespace ltx::server::test {

// Polls `pred` until it holds or `timeout` passes; returns its last value. Every wait in these
// tests is bounded by one of these.
inline bool wait_until(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= end) return pred();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

inline Job make_job(int64_t seq, const std::string& key = "", const std::string& prompt = "p") {
  Job j;
  j.seq = seq;
  char hex[33];
  std::snprintf(hex, sizeof hex, "%032llx", static_cast<unsigned long long>(seq));
  j.id = std::string("video_") + hex;
  j.batch_key = key;
  j.prompt = prompt;
  return j;
}

// Records the listener calls: per job ("started", "progress 37", "completed", "failed timeout",
// "cancelled", "requeued") and the order in which jobs started.
class RecordingListener : public SchedulerListener {
 public:
  void started(const Job& job) override { add(job.id, "started", true); }
  void progress(const Job& job, int percent, const std::string&) override {
    add(job.id, "progress " + std::to_string(percent));
  }
  void completed(const Job& job, const RunOutcome&) override { add(job.id, "completed"); }
  void failed(const Job& job, const JobError& e) override {
    add(job.id, "failed " + e.code);
    std::lock_guard lock(mu_);
    errors_[job.id] = e;
  }
  void cancelled(const Job& job) override { add(job.id, "cancelled"); }
  void requeued(const Job& job) override { add(job.id, "requeued"); }

  std::vector<std::string> events(const std::string& id) const {
    std::lock_guard lock(mu_);
    const auto it = events_.find(id);
    return it == events_.end() ? std::vector<std::string>{} : it->second;
  }
  // The last call for the job ("" when none).
  std::string last(const std::string& id) const {
    const auto e = events(id);
    return e.empty() ? "" : e.back();
  }
  bool ended(const std::string& id) const {
    const std::string l = last(id);
    return l == "completed" || l == "cancelled" || l == "requeued" || l.rfind("failed", 0) == 0;
  }
  bool wait_ended(const std::string& id) {
    return wait_until([&] { return ended(id); });
  }
  bool wait_started(const std::string& id) {
    return wait_until([&] { return !events(id).empty() && events(id).front() == "started"; });
  }
  std::vector<std::string> start_order() const {
    std::lock_guard lock(mu_);
    return start_order_;
  }
  JobError error(const std::string& id) const {
    std::lock_guard lock(mu_);
    return errors_.at(id);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::vector<std::string>> events_;
  std::map<std::string, JobError> errors_;
  std::vector<std::string> start_order_;

  void add(const std::string& id, const std::string& what, bool start = false) {
    std::lock_guard lock(mu_);
    events_[id].push_back(what);
    if (start) start_order_.push_back(id);
  }
};

}  // namespace ltx::server::test
