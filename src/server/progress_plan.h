#pragma once
// A job's progress (0..100, the `progress` field of the Video object) from the engine's stage and
// step events. Each job gets a plan: its stages in order, each with a weight, named as the engine
// reports them (generate/progress.h). The standard plan gives text encoding 5, model loading 0..5
// (by how much must still be read from disk), upsampling 2, decoding 10 (audio 2 + video 8, or
// video 10), and the rest to the denoising stages in proportion to steps x tokens (a stage-2 step
// at full resolution costs about four stage-1 steps at half resolution). Progress never goes back,
// and stays at 99 at most while the job runs: 100 is set only once the output is in place.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ltx::server {

class ProgressPlan {
 public:
  struct Stage {
    std::string name;   // as the runner reports it ("text encoding", "stage 1", ...)
    double weight = 0;  // > 0; only ratios matter
  };
  // Throws ltx::Error for an empty plan or a weight that is not positive and finite.
  explicit ProgressPlan(std::vector<Stage> stages);

  const std::vector<Stage>& stages() const { return stages_; }
  // The percentage (0..100, not capped) when stage `index` has `fraction` (0..1) done.
  double percent_at(size_t index, double fraction) const;
  // The first stage named `name` at or after `from`, if any.
  std::optional<size_t> find(const std::string& name, size_t from) const;

 private:
  std::vector<Stage> stages_;
  std::vector<double> start_;  // cumulative weight before each stage
  double total_ = 0;
};

// A denoising stage of the standard plan.
struct DenoisingStage {
  std::string name;    // "stage 1", "stage 2"
  int64_t steps = 0;   // > 0
  int64_t tokens = 0;  // > 0: the video (+ audio) tokens a step runs over
};
struct StandardPlan {
  double load_share = 1.0;  // 0 (every model resident) .. 1 (every model read from disk)
  std::vector<DenoisingStage> denoising;  // in order; at least one
  bool upsample = false;  // an "upsample" stage after the first denoising stage
  bool audio = false;     // an "audio decode" stage before the "video decode"
};
// text encoding 5, model loading (5 x load_share), the denoising stages, upsample 2, audio decode 2,
// video decode 8 (10 without audio), in the order the engine runs them.
ProgressPlan standard_progress_plan(const StandardPlan& plan);

// The progress of one running job: feed it the runner's events, it says when the percentage
// moved. Events of stages the plan lacks, and events that would move it back, change nothing; a
// stage name repeated in the plan (DFR's rounds) is matched in order (a count that goes back starts
// the next stage of that name).
class ProgressTracker {
 public:
  static constexpr int kMaxWhileRunning = 99;
  explicit ProgressTracker(ProgressPlan plan) : plan_(std::move(plan)) {}

  // The new percentage (0..99) when it rose, else nullopt. `total` 0 means the stage just started.
  std::optional<int> update(const std::string& stage, int64_t done, int64_t total);
  int percent() const { return percent_; }

 private:
  ProgressPlan plan_;
  size_t cursor_ = 0;     // the stage the last matched event named
  int64_t last_done_ = 0;  // that event's count
  bool matched_ = false;
  int percent_ = 0;
};

}  // namespace ltx::server
