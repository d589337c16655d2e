#pragma once
// The seam between the scheduler and whatever generates videos: a worker hands a JobRunner one job,
// or a batch of jobs with the same batch_key, and gets one outcome per job. The engine-backed runner
// (over generate::Engine, one per device) implements it for `ltx serve`; tests use a FakeRunner
// (tests/server/fake_runner.h). The runner knows nothing of the job store, HTTP or other jobs.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/cancel.h"
#include "server/job.h"
#include "server/progress_plan.h"

namespace ltx::server {

// Where a running job is, as the engine reports it: at every stage start (done 0), after every
// denoising step and after every decoded chunk. Stage names, as generate::Progress reports them:
// "text encoding", "model loading", "stage 1", "upsample", "stage 2", "audio decode", "video
// decode" (total = chunks); the job's ProgressPlan gives their weights.
struct ProgressEvent {
  std::string stage;
  int64_t done = 0;
  int64_t total = 0;  // 0 for a stage without steps
};

// One job of a run. The runner must stop the job at its next step (or chunk) boundary once `cancel`
// is requested or `deadline` has passed, and report it Cancelled: the scheduler knows why it asked
// (a DELETE, the job timeout, a shutdown) and turns that into the job's state. In a batch, only
// that job's output is dropped; the others go on, and the run stops early only when every job of
// it was stopped.
struct RunItem {
  const Job* job = nullptr;
  const CancelToken* cancel = nullptr;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Called on the thread that called run(), before run() returns.
  std::function<void(const ProgressEvent&)> progress;
};

enum class RunStatus { Completed, Failed, Cancelled };

struct RunOutcome {
  RunStatus status = RunStatus::Failed;
  // Completed: the finished output (written under a temporary name, renamed when whole; the
  // scheduler's listener moves it into place in the data dir and updates the job's row), and the
  // job's metrics: {"inference_time_s", "peak_memory_mb", "time_to_first_step_s", "stages": [...]}.
  std::string output_file;
  int64_t output_bytes = 0;
  std::string output_sha256;
  std::string metrics_json;
  // Failed: why (code generation_error with the engine's message, internal_error, ...).
  // Failed and Cancelled jobs leave no file behind.
  JobError error;
};

class JobRunner {
 public:
  virtual ~JobRunner() = default;

  // The weights of the job's stages, asked before the job runs (the runner knows its pipeline, its
  // step counts and token counts, and whether its models still have to be loaded).
  virtual ProgressPlan progress_plan(const Job& job) = 0;

  // Runs `items` (1 .. max_batch jobs of one batch_key) and returns their outcomes in the same
  // order. Runs on one worker thread at a time per runner. An exception thrown out of run() fails
  // every item: ltx::Cancelled as if each had returned Cancelled, ltx::Error as
  // generation_error with its message, anything else as internal_error.
  virtual std::vector<RunOutcome> run(const std::vector<RunItem>& items) = 0;
};

}  // namespace ltx::server
