#pragma once
// The JobRunner of `ltx serve`: runs a job's stored request on a resident generate::Engine (one per
// device) and writes its output into the data dir (under a temporary name, renamed when whole): an
// MP4 with its thumbnail (server/thumbnail_sink.h) when the build has image I/O, a WAV for the
// audio-only pipelines, a PNG for one frame, a tar of hdr-ic-lora's EXR frames and preview
// (server/tar_archive.h) with the preview's thumbnail (VideoRequest::output_format). Batches write MP4s.
// Each job's time to first step (from the run's start to the first denoising step) and the model
// loads it needed are logged:
//   job video_… ttfs 0.41 s (queue 3.2 s, text 0.30 s, loads 0)
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generate/engine.h"
#include "server/data_dir.h"
#include "server/job_runner.h"
#include "server/metrics.h"
#include "server/thumbnail_sink.h"
#include "server/video_request.h"

namespace ltx::server {

class EngineRunner final : public JobRunner {
 public:
  // `engine` (running on `device`) and `dir` outlive the runner.
  // `metrics` (optional, outliving the runner): each run's job count goes to ltx_batch_size.
  EngineRunner(generate::Engine& engine, Device device, const DataDir& dir,
               Metrics* metrics = nullptr)
      : engine_(engine), device_(device), dir_(dir), metrics_(metrics) {}

  ProgressPlan progress_plan(const Job& job) override;
  // Several jobs run as one Engine::run_batch when the engine agrees they can share a run (its
  // batch keys are equal and non-empty), else one after another as each would run alone. Each
  // job gets its own MP4 and outcome; a batch logs one line:
  //   batch of 4 jobs: ids video_…, video_…, video_…, video_…, 3.21 s
  std::vector<RunOutcome> run(const std::vector<RunItem>& items) override;

 private:
  // The engine's controls for a job: its token, deadline and progress; `time_steps`: this job's
  // denoising steps are timed into the step histogram.
  generate::JobControl control_of(const RunItem& item, std::chrono::steady_clock::time_point t0,
                                  bool time_steps = true);
  // Every item's options when the engine can run them as one batch, else nullopt.
  std::optional<std::vector<generate::GenerateOptions>> batchable(
      const std::vector<RunItem>& items) const;
  std::vector<RunOutcome> run_batch(const std::vector<RunItem>& items,
                                    const std::vector<generate::GenerateOptions>& options);
  RunOutcome run_one(const RunItem& item);
  // hdr-ic-lora: its EXR frame folder and sRGB preview (unless skip_mp4) in the job's parts
  // folder, a thumbnail of the preview's middle frame, then one tar of the folder at `output`.
  // The job's run with its thumbnail taken on the way to `sink` (none without image I/O).
  generate::GenerateResult run_with_thumbnail(const Job& job, const generate::GenerateOptions& o,
                                              const generate::JobControl& control,
                                              generate::MediaSink& sink, ThumbnailFrames frames);
  // A job whose output is several files: the sink `make_sink` makes writes them into the job's
  // parts folder (emptied first), which is archived into `output` when `archive`, then removed
  // (also on an error).
  using PartsSinkMaker =
      std::function<std::unique_ptr<generate::MediaSink>(const std::string& parts)>;
  generate::GenerateResult run_into_parts(const Job& job, const generate::GenerateOptions& o,
                                          const generate::JobControl& control,
                                          const std::string& output, bool archive,
                                          ThumbnailFrames frames, const PartsSinkMaker& make_sink);
  // hdr-ic-lora: its EXR frames and sRGB preview in a tar at `output`.
  generate::GenerateResult run_hdr(const Job& job, const generate::GenerateOptions& o,
                                   const generate::JobControl& control, const std::string& output);
  // An `hdr` request: its HLG master and EXR frames in a tar at `output` (`archive`), or the master
  // alone there.
  generate::GenerateResult run_hdr_master(const Job& job, const generate::GenerateOptions& o,
                                          const generate::JobControl& control,
                                          const std::string& output, bool archive);
  RunOutcome completed(const Job& job, const generate::GenerateResult& result,
                       const std::string& output, double seconds, double peak_mb,
                       int64_t batch_size);

  generate::Engine& engine_;
  Device device_;
  const DataDir& dir_;
  Metrics* metrics_ = nullptr;
};

// What requests may ask of the engine's model: its id, pipelines with their defaults, the LoRA
// library's names; `limits` as the operator set them, each size and frame limit lowered to the
// largest any of the engine's pipelines accepts.
ServedModel served_model(const generate::EngineInfo& info, RequestLimits limits);

}  // namespace ltx::server
