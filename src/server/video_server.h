#pragma once
// The server behind the routes: VideoService over the job store (SQLite + data dir), the
// scheduler (queue and workers over the JobRunners) and the job events. Every state change of a
// job goes to the store first (so a crash loses nothing a client was told) and is then published
// to its readers (event streams, sync waits).
//
// Lifecycle: construct (opens the data dir, locks it, recovers the store, queues the jobs it left
// queued) → start() (starts the workers and the janitor) → set_ready(true) once the models are
// loaded → drain() on shutdown (no new jobs, the running one finishes within the grace or is
// re-queued, event streams end).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "server/data_dir.h"
#include "server/job_events.h"
#include "server/job_runner.h"
#include "server/job_store.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/video_request.h"
#include "server/video_service.h"

namespace ltx::server {

struct ServerOptions {
  std::string data_dir;
  SchedulerOptions scheduler;
  JobStoreOptions store;
  std::chrono::seconds janitor_interval{60};
};

class VideoServer final : public VideoService, private SchedulerListener {
 public:
  // Makes the runners (one per device) once the data dir is open; they write the outputs there.
  using RunnerFactory = std::function<std::vector<std::unique_ptr<JobRunner>>(const DataDir&)>;
  // `metrics` outlives the server. Throws ltx::Error naming the data dir when it cannot be used
  // (another server holds it, not writable, not a job store).
  VideoServer(ServerOptions options, ServedModel model, const RunnerFactory& make_runners,
              Metrics& metrics);
  ~VideoServer() override;

  const RecoverySummary& recovery() const { return store_.recovery(); }
  // Starts the workers and the janitor; jobs created before wait in the queue. Does nothing once
  // drain() was called.
  void start();
  // Whether the models are loaded (GET /ready), and what /ready adds about them (e.g. the model
  // cache's bytes).
  void set_ready(bool ready) { ready_ = ready; }
  void set_status_extra(std::function<nlohmann::json()> extra) { status_extra_ = std::move(extra); }
  // Graceful shutdown: creates get 503, the running jobs get `grace` to finish and are re-queued
  // after it, event streams and waits end. Returns when the workers stopped.
  void drain(std::chrono::milliseconds grace);

  // VideoService
  Job create(const CreateBody& body) override;
  std::optional<Job> get(const std::string& id) override;
  ListPage list(const ListQuery& query) override;
  bool remove(const std::string& id) override;
  std::optional<Job> cancel(const std::string& id) override;
  std::optional<ContentFile> content(const std::string& id, ContentVariant variant) override;
  std::optional<JobSnapshot> wait_for_change(const std::string& id, uint64_t seen,
                                             std::chrono::milliseconds timeout) override;
  bool stopping() const override { return draining_; }
  std::string models_json() override;
  Readiness readiness() override;
  std::string metrics_text() override;
  std::string download_token(const std::string& id) override;

 private:
  // SchedulerListener
  void started(const Job& job) override;
  void progress(const Job& job, int percent, const std::string& stage) override;
  void completed(const Job& job, const RunOutcome& outcome) override;
  void failed(const Job& job, const JobError& error) override;
  void cancelled(const Job& job) override;
  void requeued(const Job& job) override;

  // Publishes the stored state of a job that changed (`changed` nullopt: the transition lost a race
  // with a delete or a cancel, nothing to publish). A job being deleted is removed once it ended.
  void after_transition(const std::string& id, const std::optional<Job>& changed, bool ended);
  void ended(const Job& job, const char* outcome);
  void janitor();

  ServerOptions options_;
  ServedModel model_;
  Metrics& metrics_;
  int64_t started_at_ = 0;
  DataDir dir_;
  JobStore store_;
  JobEvents events_;
  std::vector<std::unique_ptr<JobRunner>> runners_;
  Scheduler scheduler_;
  std::atomic<bool> ready_{false}, draining_{false};
  std::function<nlohmann::json()> status_extra_;

  std::mutex lifecycle_mu_;  // start() and drain(), never taken by the listener's calls
  std::mutex mu_;
  std::set<std::string> deleting_;  // running jobs a DELETE is waiting on
  std::map<std::string, std::string> stage_;  // running job -> its stage

  std::mutex janitor_mu_;
  std::condition_variable janitor_cv_;
  bool janitor_stop_ = false;
  std::thread janitor_;
};

}  // namespace ltx::server
