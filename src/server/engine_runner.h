#pragma once
// The JobRunner of `ltx serve`: runs a job's stored request on a resident generate::Engine (one per
// device) and writes its MP4 into the data dir (under a temporary name, renamed when whole).
// Each job's time to first step (from the run's start to the first denoising step) and the model
// loads it needed are logged:
//   job video_… ttfs 0.41 s (queue 3.2 s, text 0.30 s, loads 0)
#include <string>
#include <vector>

#include "generate/engine.h"
#include "server/data_dir.h"
#include "server/job_runner.h"
#include "server/video_request.h"

namespace ltx::server {

class EngineRunner final : public JobRunner {
 public:
  // `engine` (running on `device`) and `dir` outlive the runner.
  EngineRunner(generate::Engine& engine, Device device, const DataDir& dir)
      : engine_(engine), device_(device), dir_(dir) {}

  ProgressPlan progress_plan(const Job& job) override;
  // The jobs of a batch run one after another (each as it would run alone).
  std::vector<RunOutcome> run(const std::vector<RunItem>& items) override;

 private:
  RunOutcome run_one(const RunItem& item);

  generate::Engine& engine_;
  Device device_;
  const DataDir& dir_;
};

// What requests may ask of the engine's model: its id, pipelines with their defaults, the LoRA
// library's names; `limits` as the operator set them, each size and frame limit lowered to the
// largest any of the engine's pipelines accepts.
ServedModel served_model(const generate::EngineInfo& info, RequestLimits limits);

}  // namespace ltx::server
