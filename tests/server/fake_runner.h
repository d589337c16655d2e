#pragma once
// A JobRunner for tests of the scheduler and the server: no engine, no files. Each job runs a
// number of "steps" (each `step_time` long, a whole batch stepping together), reporting the same
// stage and step events as the engine, and stops at a step boundary once its CancelToken is set or
// its deadline has passed. A job may fail at a given step, as an outcome or by throwing. hold()
// parks every run at its next step boundary until release(), so a test can look at a running job
// without racing it (a parked job still stops when its token is set).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "server/job_runner.h"
#include "server/progress_plan.h"

namespace ltx::server::test {

struct FakeBehaviour {
  int steps = 3;
  std::chrono::milliseconds step_time{0};
  int fail_at_step = 0;  // 1-based; 0: never
  enum class Failure { Outcome, ThrowError, ThrowOther } failure = Failure::Outcome;
};

class FakeRunner : public JobRunner {
 public:
  // Behaviour of every job, unless its prompt is in by_prompt. Set both before jobs run.
  FakeBehaviour defaults;
  std::map<std::string, FakeBehaviour> by_prompt;

  ProgressPlan progress_plan(const Job& job) override {
    return standard_progress_plan({0.0, {{"stage 1", behaviour(job).steps, 64}}, false});
  }

  std::vector<RunOutcome> run(const std::vector<RunItem>& items) override {
    {
      std::lock_guard lock(mu_);
      ++active_runs_;
      max_active_runs_ = std::max(max_active_runs_, active_runs_);
      std::vector<std::string> ids;
      for (const RunItem& it : items) ids.push_back(it.job->id);
      batches_.push_back(ids);
    }
    struct Leave {
      FakeRunner& r;
      ~Leave() {
        std::lock_guard lock(r.mu_);
        --r.active_runs_;
      }
    } leave{*this};

    std::vector<RunOutcome> out(items.size());
    std::vector<bool> active(items.size(), true);
    std::vector<FakeBehaviour> plan;
    for (const RunItem& it : items) {
      plan.push_back(behaviour(*it.job));
      it.progress({"text encoding", 0, 0});
      it.progress({"stage 1", 0, plan.back().steps});
    }
    for (int step = 1;; ++step) {
      wait_while_held(items, active);
      bool any = false;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!active[i]) continue;
        if (stop_requested(items[i])) {
          active[i] = false;
          out[i].status = RunStatus::Cancelled;
        } else {
          any = true;
        }
      }
      if (!any) break;
      std::this_thread::sleep_for(plan.front().step_time);
      for (size_t i = 0; i < items.size(); ++i) {
        if (!active[i]) continue;
        const FakeBehaviour& b = plan[i];
        const std::string& id = items[i].job->id;
        if (b.fail_at_step == step) {
          if (b.failure == FakeBehaviour::Failure::ThrowError) fail("fake failure at step ", step);
          if (b.failure == FakeBehaviour::Failure::ThrowOther)
            throw std::logic_error("fake internal failure");
          active[i] = false;
          out[i].status = RunStatus::Failed;
          out[i].error = {"generation_error", "fake failure at step " + std::to_string(step)};
          continue;
        }
        {
          std::lock_guard lock(mu_);
          steps_done_[id] = step;
        }
        changed_.notify_all();
        items[i].progress({"stage 1", step, b.steps});
        if (step == b.steps) {
          items[i].progress({"video decode", 0, 1});
          items[i].progress({"video decode", 1, 1});
          active[i] = false;
          out[i].status = RunStatus::Completed;
          out[i].output_file = "fake/" + id + ".mp4";
          out[i].output_bytes = 1;
          out[i].metrics_json = "{\"steps\":" + std::to_string(step) + "}";
        }
      }
    }
    return out;
  }

  void hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard lock(mu_);
      held_ = false;
    }
    changed_.notify_all();
  }
  // Steps the job finished (0 before its first).
  int steps_done(const std::string& id) const {
    std::lock_guard lock(mu_);
    const auto it = steps_done_.find(id);
    return it == steps_done_.end() ? 0 : it->second;
  }
  // True once `n` runs are parked by hold() (false when `timeout` passes first).
  bool wait_parked(int n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return parked_ >= n; });
  }
  // The job ids of every run, in the order the runs started.
  std::vector<std::vector<std::string>> batches() const {
    std::lock_guard lock(mu_);
    return batches_;
  }
  // The most runs this runner had at once (a worker runs one at a time: 1).
  int max_active_runs() const {
    std::lock_guard lock(mu_);
    return max_active_runs_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool held_ = false;
  int parked_ = 0;
  int active_runs_ = 0, max_active_runs_ = 0;
  std::map<std::string, int> steps_done_;
  std::vector<std::vector<std::string>> batches_;

  FakeBehaviour behaviour(const Job& job) const {
    const auto it = by_prompt.find(job.prompt);
    return it == by_prompt.end() ? defaults : it->second;
  }
  static bool stop_requested(const RunItem& item) {
    return item.cancel->requested() || std::chrono::steady_clock::now() >= item.deadline;
  }
  // Parks at a step boundary while held; a job whose token is set is let go (it stops there).
  void wait_while_held(const std::vector<RunItem>& items, const std::vector<bool>& active) {
    std::unique_lock lock(mu_);
    ++parked_;
    changed_.notify_all();
    const auto all_stopping = [&] {
      for (size_t i = 0; i < items.size(); ++i)
        if (active[i] && !stop_requested(items[i])) return false;
      return true;
    };
    // The token is set from other threads without this mutex, so poll it in short slices.
    while (held_ && !all_stopping()) changed_.wait_for(lock, std::chrono::milliseconds(2));
    --parked_;
  }
};

}  // namespace ltx::server::test
