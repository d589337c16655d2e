#pragma once
// Runs the queued jobs: a bounded FIFO in memory (mirroring the store's `queued` rows) and one
// worker thread per device, each with its own JobRunner. It owns no storage: every state change
// goes to a SchedulerListener, which the server implements over the job store and JobEvents.
//
// Order and batching. A worker always takes the oldest queued job. With max_batch > 1 it adds the
// next queued jobs with the same non-empty batch_key, oldest first, up to max_batch; they pass the
// jobs of other keys queued between them, and only they do: the jobs left behind keep their order,
// and since every run is led by the oldest job, a job waits for at most as many runs as there are
// jobs ahead of it. An empty batch_key (auto-duration jobs, say) always runs alone.
//
// Stopping. cancel() takes a queued job out at once; a running one gets its CancelToken set and
// stops at its next step boundary (in a batch, only its output is dropped). A job whose run passes
// job_timeout stops the same way and fails with code `timeout`. drain() is the graceful shutdown:
// submissions get 503, nothing new starts, running jobs get a grace period to finish and are then
// stopped at a step and handed back as requeued (the run does not count as an attempt).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/cancel.h"
#include "server/job.h"
#include "server/job_runner.h"
#include "server/progress_plan.h"

namespace ltx::server {

struct SchedulerOptions {
  size_t max_queue = 16;  // queued jobs (running ones not counted); a submit beyond it gets 429
  size_t max_batch = 1;   // jobs of one batch_key run together, at most this many
  std::chrono::milliseconds job_timeout{0};  // a run's limit from its start; 0: none
  // The job time Retry-After assumes until jobs have finished.
  double initial_job_seconds = 10;
};

// The reasons the scheduler gives a CancelToken (CancelToken::reason()).
inline constexpr int kCancelByRequest = 1;
inline constexpr int kCancelForShutdown = 2;
inline constexpr int kCancelForTimeout = 3;

// What the server does with each state change; called from the worker threads (and from
// cancel()'s caller for a queued job), never with the scheduler's lock held, so it may call back
// into the scheduler. For one job the calls come in order: started, progress..., then exactly one
// of completed / failed / cancelled / requeued (a queued job that is cancelled gets only
// cancelled, a job the runner cannot plan only failed). An exception out of a call is logged and
// the worker goes on; out of completed() it fails the job instead (the output could not be put in
// place). A listener must not call drain(): that waits for the worker it runs on.
class SchedulerListener {
 public:
  virtual ~SchedulerListener() = default;
  // The job left the queue and runs (in_progress, started_at, one more attempt).
  virtual void started(const Job& job) = 0;
  // Its progress rose to `percent` (1..99) in `stage`.
  virtual void progress(const Job& job, int percent, const std::string& stage) = 0;
  // The runner finished it: move the output into place, then set completed with progress 100.
  virtual void completed(const Job& job, const RunOutcome& outcome) = 0;
  virtual void failed(const Job& job, const JobError& error) = 0;
  virtual void cancelled(const Job& job) = 0;
  // A shutdown stopped it: queued again, and this run does not count as an attempt.
  virtual void requeued(const Job& job) = 0;
};

class Scheduler {
 public:
  // One worker per runner (one runner per device); the runners and the listener outlive the
  // scheduler. Nothing runs before start().
  Scheduler(SchedulerOptions options, std::vector<JobRunner*> runners, SchedulerListener& listener);
  ~Scheduler();  // drain(0) when drain() was not called
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Starts the workers (after the recovered jobs were restore()d, so the oldest runs first).
  void start();

  // Throws what submit() would throw now (ApiError 503 `draining`, 429 `queue_full` with
  // retry_after_s), so a request can be turned away before its uploads are stored.
  void check_admission() const;
  // Queues a stored job (ordered by seq). Throws ApiError 503 while draining, 429 when max_queue
  // jobs wait (retry_after_s = max(1, ceil(mean job time x queue length / workers))); the caller
  // then removes the job it stored.
  void submit(const Job& job);
  // Queues a job found queued in the store at start-up, whatever max_queue says.
  void restore(const Job& job);

  enum class CancelResult {
    NotFound,  // neither queued nor running here
    Removed,   // was queued: out of the queue, and listener.cancelled() was called
    Stopping,  // runs: it stops at its next step boundary; the listener hears how it ended
               // (completed, when it finished its last step before it looked)
  };
  CancelResult cancel(const std::string& id);

  // Graceful shutdown (returns when every worker has stopped). Calling it again does nothing.
  void drain(std::chrono::milliseconds grace);

  size_t queue_length() const;
  // 0 for the job that runs next; nullopt when the job is not queued.
  std::optional<size_t> queue_position(const std::string& id) const;
  std::vector<std::string> running() const;
  bool draining() const;
  // The mean time per job over the last runs that completed a job (a batch's time shared by its
  // jobs); initial_job_seconds before any.
  double mean_job_seconds() const;
  int retry_after_s() const;

 private:
  struct Running {
    Job job;
    CancelToken token;
    std::optional<ProgressTracker> tracker;  // set before the run starts
    bool by_request = false;    // cancel() asked
    bool for_shutdown = false;  // drain() asked
    explicit Running(Job j) : job(std::move(j)) {}
  };
  using Clock = std::chrono::steady_clock;

  SchedulerOptions options_;
  std::vector<JobRunner*> runners_;
  SchedulerListener& listener_;

  mutable std::mutex mu_;
  std::condition_variable work_;  // a job was queued, or draining began
  std::condition_variable idle_;  // a run ended
  std::deque<Job> queue_;
  std::map<std::string, std::shared_ptr<Running>> running_;
  std::deque<double> recent_seconds_;  // per-job times of the last runs
  bool draining_ = false;
  bool drained_ = false;
  std::vector<std::thread> workers_;

  void enqueue_locked(const Job& job);
  void admit_locked() const;
  int retry_after_locked() const;
  double mean_locked() const;
  // Moves the next batch from the queue to running_ (in one step, so drain() sees it running).
  std::vector<std::shared_ptr<Running>> take_batch_locked();
  void work(JobRunner& runner);
  void run_batch(JobRunner& runner, std::vector<std::shared_ptr<Running>> runs);
  void finish(Running& r, const RunOutcome& outcome, Clock::time_point deadline);
};

}  // namespace ltx::server
