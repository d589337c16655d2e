#pragma once
// The latest state of every job, for the readers that follow jobs as they change (the event
// streams of GET /v1/videos/{id}/events, POST /v1/videos/sync): publish(job) replaces the job's
// snapshot and bumps its version; wait_for_change() sleeps until the version differs from the one
// the reader saw. Coalesced: a job keeps one snapshot, so a slow reader skips to the latest state
// and nothing queues up behind it. Versions come from one counter, so a version is never reused.
// A job's entry lives until remove(): the server removes it when the job is deleted or expires,
// so retention bounds the memory.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/job.h"
#include "server/video_service.h"

namespace ltx::server {

class JobEvents {
 public:
  JobEvents() = default;
  JobEvents(const JobEvents&) = delete;
  JobEvents& operator=(const JobEvents&) = delete;
  ~JobEvents();

  // Records `job` as its latest state and wakes its readers. Returns the new version.
  uint64_t publish(const Job& job);
  // Forgets the job (deleted or expired): its readers wake with nullopt.
  void remove(const std::string& id);
  std::optional<JobSnapshot> latest(const std::string& id) const;

  // The job's snapshot once its version differs from `seen` (at once when it already does; pass 0
  // for the current snapshot), or when `timeout` passes or stop() was called (then the snapshot is
  // the current one, possibly still at `seen`). Nullopt when the job is unknown or was removed.
  std::optional<JobSnapshot> wait_for_change(const std::string& id, uint64_t seen,
                                             std::chrono::milliseconds timeout);

  // Wakes every reader; later waits return at once. For shutdown.
  void stop();
  bool stopped() const;

  size_t size() const;  // jobs held
  size_t waiting() const;  // readers asleep in wait_for_change

 private:
  struct Entry {
    JobSnapshot snapshot;
    bool removed = false;
    std::condition_variable changed;
  };
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  uint64_t last_version_ = 0;
  size_t waiting_ = 0;
  bool stopped_ = false;
};

}  // namespace ltx::server
