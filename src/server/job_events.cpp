#include "server/job_events.h"

namespace ltx::server {

JobEvents::~JobEvents() { stop(); }

uint64_t JobEvents::publish(const Job& job) {
  std::lock_guard lock(mu_);
  auto& entry = entries_[job.id];
  if (!entry) entry = std::make_shared<Entry>();
  entry->snapshot.job = job;
  entry->snapshot.version = ++last_version_;
  entry->changed.notify_all();
  return entry->snapshot.version;
}

void JobEvents::remove(const std::string& id) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second->removed = true;
  it->second->changed.notify_all();
  entries_.erase(it);
}

std::optional<JobSnapshot> JobEvents::latest(const std::string& id) const {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second->snapshot;
}

std::optional<JobSnapshot> JobEvents::wait_for_change(const std::string& id, uint64_t seen,
                                                      std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  // Held by the reader, so that remove() may drop the map's reference while it sleeps.
  const std::shared_ptr<Entry> entry = it->second;
  ++waiting_;
  entry->changed.wait_for(lock, timeout, [&] {
    return entry->removed || stopped_ || entry->snapshot.version != seen;
  });
  --waiting_;
  if (entry->removed) return std::nullopt;
  return entry->snapshot;
}

void JobEvents::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  for (auto& [id, entry] : entries_) entry->changed.notify_all();
}

bool JobEvents::stopped() const {
  std::lock_guard lock(mu_);
  return stopped_;
}

size_t JobEvents::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

size_t JobEvents::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

}  // namespace ltx::server
