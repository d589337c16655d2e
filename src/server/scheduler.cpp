#include "server/scheduler.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"

namespace ltx::server {

namespace {

constexpr size_t kRecentRuns = 32;  // the window of mean_job_seconds()

JobError internal_error(const std::string& what, const std::string& job_id, const char* context) {
  // The details go to the log only: the API shows a stable message.
  log_warn("job ", job_id, ": internal error ", context, ": ", what);
  return {"internal_error", "internal error (see the server log)"};
}

// Calls the listener; an exception must not take the worker down with it.
template <typename Fn>
void notify(const Job& job, const char* what, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    log_warn("job ", job.id, ": the scheduler listener failed on ", what, ": ", e.what());
  }
}

}  // namespace

Scheduler::Scheduler(SchedulerOptions options, std::vector<JobRunner*> runners,
                     SchedulerListener& listener)
    : options_(options), runners_(std::move(runners)), listener_(listener) {
  LTX_CHECK(!runners_.empty(), "the scheduler needs at least one runner (one per device)");
  for (JobRunner* r : runners_) LTX_CHECK(r != nullptr, "the scheduler was given a null runner");
  LTX_CHECK(options_.max_queue >= 1, "--max-queue must be at least 1 (got ", options_.max_queue, ")");
  LTX_CHECK(options_.max_batch >= 1, "--max-batch must be at least 1 (got ", options_.max_batch, ")");
  LTX_CHECK(options_.job_timeout.count() >= 0, "the job timeout must not be negative");
}

Scheduler::~Scheduler() { drain(std::chrono::milliseconds(0)); }

void Scheduler::start() {
  std::lock_guard lock(mu_);
  LTX_CHECK(workers_.empty() && !draining_, "the scheduler was started already or is draining");
  for (JobRunner* r : runners_) workers_.emplace_back([this, r] { work(*r); });
}

void Scheduler::enqueue_locked(const Job& job) {
  // A job in the queue twice would run twice and overwrite its own output.
  LTX_CHECK(std::none_of(queue_.begin(), queue_.end(), [&](const Job& q) { return q.id == job.id; }),
            "job ", job.id, " is already queued");
  // Ordered by seq; equal or unset seqs keep submission order.
  auto pos = queue_.end();
  while (pos != queue_.begin() && std::prev(pos)->seq > job.seq) --pos;
  queue_.insert(pos, job);
  work_.notify_one();
}

double Scheduler::mean_locked() const {
  if (recent_seconds_.empty()) return options_.initial_job_seconds;
  return std::accumulate(recent_seconds_.begin(), recent_seconds_.end(), 0.0) /
         static_cast<double>(recent_seconds_.size());
}

int Scheduler::retry_after_locked() const {
  const double wait =
      mean_locked() * static_cast<double>(queue_.size()) / static_cast<double>(runners_.size());
  return std::max(1, static_cast<int>(std::ceil(wait)));
}

void Scheduler::admit_locked() const {
  if (draining_) {
    ApiError e(503, "draining", "the server is shutting down and takes no new jobs; retry later");
    e.retry_after_s = retry_after_locked();
    throw e;
  }
  if (queue_.size() >= options_.max_queue) {
    const int after = retry_after_locked();
    ApiError e(429, "queue_full",
               str("the queue is full (", queue_.size(), " jobs wait, --max-queue ",
                   options_.max_queue, "); retry in about ", after, " s"));
    e.retry_after_s = after;
    throw e;
  }
}

void Scheduler::check_admission() const {
  std::lock_guard lock(mu_);
  admit_locked();
}

void Scheduler::submit(const Job& job) {
  std::lock_guard lock(mu_);
  LTX_CHECK(!running_.count(job.id), "job ", job.id, " is already running");
  admit_locked();
  enqueue_locked(job);
}

void Scheduler::restore(const Job& job) {
  std::lock_guard lock(mu_);
  LTX_CHECK(!running_.count(job.id), "job ", job.id, " is already running");
  enqueue_locked(job);
}

Scheduler::CancelResult Scheduler::cancel(const std::string& id) {
  std::optional<Job> removed;
  {
    std::lock_guard lock(mu_);
    const auto it = std::find_if(queue_.begin(), queue_.end(),
                                 [&](const Job& j) { return j.id == id; });
    if (it != queue_.end()) {
      removed = std::move(*it);
      queue_.erase(it);
    } else if (const auto r = running_.find(id); r != running_.end()) {
      r->second->by_request = true;
      r->second->token.request(kCancelByRequest);
      return CancelResult::Stopping;
    } else {
      return CancelResult::NotFound;
    }
  }
  notify(*removed, "cancelled", [&] { listener_.cancelled(*removed); });
  return CancelResult::Removed;
}

void Scheduler::drain(std::chrono::milliseconds grace) {
  std::vector<std::thread> workers;
  {
    std::unique_lock lock(mu_);
    if (drained_) return;
    draining_ = true;
    work_.notify_all();
    if (!idle_.wait_for(lock, grace, [&] { return running_.empty(); })) {
      for (auto& [id, r] : running_) {
        r->for_shutdown = true;
        r->token.request(kCancelForShutdown);
      }
    }
    workers.swap(workers_);
    drained_ = true;
  }
  for (std::thread& t : workers) t.join();
}

size_t Scheduler::queue_length() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

std::optional<size_t> Scheduler::queue_position(const std::string& id) const {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < queue_.size(); ++i)
    if (queue_[i].id == id) return i;
  return std::nullopt;
}

std::vector<std::string> Scheduler::running() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, r] : running_) ids.push_back(id);
  return ids;
}

bool Scheduler::draining() const {
  std::lock_guard lock(mu_);
  return draining_;
}

double Scheduler::mean_job_seconds() const {
  std::lock_guard lock(mu_);
  return mean_locked();
}

int Scheduler::retry_after_s() const {
  std::lock_guard lock(mu_);
  return retry_after_locked();
}

std::vector<std::shared_ptr<Scheduler::Running>> Scheduler::take_batch_locked() {
  std::vector<std::shared_ptr<Running>> batch;
  batch.push_back(std::make_shared<Running>(std::move(queue_.front())));
  queue_.pop_front();
  const std::string key = batch.front()->job.batch_key;
  if (!key.empty()) {
    for (auto it = queue_.begin(); it != queue_.end() && batch.size() < options_.max_batch;) {
      if (it->batch_key == key) {
        batch.push_back(std::make_shared<Running>(std::move(*it)));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& r : batch) running_[r->job.id] = r;
  return batch;
}

void Scheduler::work(JobRunner& runner) {
  for (;;) {
    std::vector<std::shared_ptr<Running>> batch;
    {
      std::unique_lock lock(mu_);
      work_.wait(lock, [&] { return draining_ || !queue_.empty(); });
      if (draining_) return;
      batch = take_batch_locked();
    }
    run_batch(runner, std::move(batch));
  }
}

void Scheduler::run_batch(JobRunner& runner, std::vector<std::shared_ptr<Running>> batch) {
  // Plan each job first: one the runner cannot plan fails alone, before it is marked started.
  std::vector<std::shared_ptr<Running>> runs;
  for (const auto& r : batch) {
    std::optional<JobError> err;
    try {
      r->tracker.emplace(runner.progress_plan(r->job));
      runs.push_back(r);
      continue;
    } catch (const Error& e) {
      err = JobError{"generation_error", e.what()};
    } catch (const std::exception& e) {
      err = internal_error(e.what(), r->job.id, "planning its progress");
    }
    notify(r->job, "failed", [&] { listener_.failed(r->job, *err); });
    std::lock_guard lock(mu_);
    running_.erase(r->job.id);
    idle_.notify_all();
  }
  if (runs.empty()) return;
  for (const auto& r : runs) notify(r->job, "started", [&] { listener_.started(r->job); });

  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      options_.job_timeout.count() > 0 ? start + options_.job_timeout : Clock::time_point::max();
  std::vector<RunItem> items;
  for (const auto& r : runs) {
    Running* run = r.get();
    RunItem item;
    item.job = &run->job;
    item.cancel = &run->token;
    item.deadline = deadline;
    item.progress = [this, run, deadline](const ProgressEvent& e) {
      // Runners check the deadline themselves; setting the token too stops one that only
      // watches the token.
      if (Clock::now() >= deadline) run->token.request(kCancelForTimeout);
      if (const auto p = run->tracker->update(e.stage, e.done, e.total))
        notify(run->job, "progress", [&] { listener_.progress(run->job, *p, e.stage); });
    };
    items.push_back(std::move(item));
  }

  std::vector<RunOutcome> outcomes;
  try {
    outcomes = runner.run(items);
    if (outcomes.size() != items.size()) {
      const std::string what = str("the runner returned ", outcomes.size(), " outcomes for ",
                                   items.size(), " jobs");
      outcomes.assign(items.size(), RunOutcome{});
      for (size_t i = 0; i < runs.size(); ++i)
        outcomes[i].error = internal_error(what, runs[i]->job.id, "running it");
    }
  } catch (const Cancelled&) {
    outcomes.assign(items.size(), RunOutcome{RunStatus::Cancelled});
  } catch (const Error& e) {
    outcomes.assign(items.size(), RunOutcome{RunStatus::Failed});
    for (RunOutcome& o : outcomes) o.error = {"generation_error", e.what()};
  } catch (const std::exception& e) {
    outcomes.assign(items.size(), RunOutcome{RunStatus::Failed});
    for (size_t i = 0; i < runs.size(); ++i)
      outcomes[i].error = internal_error(e.what(), runs[i]->job.id, "running it");
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  for (size_t i = 0; i < runs.size(); ++i) finish(*runs[i], outcomes[i], deadline);

  std::lock_guard lock(mu_);
  for (const auto& r : runs) running_.erase(r->job.id);
  // Only runs that produced something say how long a job takes (a cancel cuts a run short).
  if (std::any_of(outcomes.begin(), outcomes.end(),
                  [](const RunOutcome& o) { return o.status == RunStatus::Completed; })) {
    recent_seconds_.push_back(seconds / static_cast<double>(runs.size()));
    if (recent_seconds_.size() > kRecentRuns) recent_seconds_.pop_front();
  }
  idle_.notify_all();
}

void Scheduler::finish(Running& r, const RunOutcome& outcome, Clock::time_point deadline) {
  const Job& job = r.job;
  if (outcome.status == RunStatus::Completed) {
    try {
      listener_.completed(job, outcome);
    } catch (const std::exception& e) {
      const JobError err = internal_error(e.what(), job.id, "storing its output");
      notify(job, "failed", [&] { listener_.failed(job, err); });
    }
    return;
  }
  if (outcome.status == RunStatus::Failed) {
    notify(job, "failed", [&] { listener_.failed(job, outcome.error); });
    return;
  }
  bool by_request = false, for_shutdown = false;
  {
    std::lock_guard lock(mu_);
    by_request = r.by_request;
    for_shutdown = r.for_shutdown;
  }
  if (by_request) {
    notify(job, "cancelled", [&] { listener_.cancelled(job); });
  } else if (for_shutdown) {
    notify(job, "requeued", [&] { listener_.requeued(job); });
    std::lock_guard lock(mu_);
    enqueue_locked(job);
  } else if (Clock::now() >= deadline) {
    const JobError err{"timeout", str("the job ran longer than the job timeout (",
                                      options_.job_timeout.count() / 1000.0, " s) and was stopped")};
    notify(job, "failed", [&] { listener_.failed(job, err); });
  } else {
    const JobError err = internal_error("the runner stopped the job without being asked", job.id,
                                        "running it");
    notify(job, "failed", [&] { listener_.failed(job, err); });
  }
}

}  // namespace ltx::server
