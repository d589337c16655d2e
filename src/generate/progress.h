#pragma once
// Progress and timings of a generation on stderr. Work is split into named stages ("text
// encoding", "stage 1", "decode", ...). A stage with steps shows a bar with the step count, the
// elapsed time and an ETA: redrawn in place on a terminal, as plain lines otherwise (one per
// step, so logs stay readable). Every stage's wall time is kept for the summary at the end, with
// the tensor allocations the stage made on the host and on the GPUs (which say where its work ran).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/cancel.h"
#include "core/storage.h"
#include "core/tensor.h"

namespace ltx::generate {

// What a Progress listener is told, in order: StageStart, then Step events (done of total; the
// pipelines report step 0 when a stage starts, then every finished step; the video decode one
// step per decoded chunk), then StageEnd with the stage's wall time.
struct ProgressEvent {
  enum class Kind { StageStart, Step, StageEnd };
  Kind kind = Kind::StageStart;
  std::string stage;
  int64_t done = 0, total = 0;  // Step only
  double stage_seconds = 0.0;   // since the stage started
  double total_seconds = 0.0;   // since the Progress was made
};
using ProgressListener = std::function<void(const ProgressEvent&)>;

class Progress {
 public:
  enum class Mode { Auto, Bar, Lines, Off };
  // Auto: Bar when `out` is a terminal, Lines otherwise.
  explicit Progress(std::FILE* out = stderr, Mode mode = Mode::Auto);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Every stage start and step checks `token` (null: none) and throws ltx::Cancelled once it was
  // requested: the generation's stage and step boundaries are where it stops.
  void set_cancel_token(const CancelToken* token) { cancel_ = token; }
  // The same boundaries throw DeadlineExceeded once `deadline` passed (nullopt: none).
  void set_deadline(std::optional<Deadline> deadline) { deadline_ = deadline; }
  // Called at every stage start, step and stage end, after the cancellation checks (so a step
  // the run does not reach is never reported), in every Mode (Off included). It runs on the
  // generating thread; an exception it throws (e.g. Cancelled) ends the generation.
  void set_listener(ProgressListener listener) { listener_ = std::move(listener); }

  // Ends the current stage (if any) and starts `name`. Re-entering the stage that is running
  // continues it (the pipelines report a stage's step 0 when it starts).
  void stage(const std::string& name);
  // `done` of `total` steps of the current stage (0 <= done <= total).
  void step(int64_t done, int64_t total);
  // Ends the current stage; its time joins the summary.
  void end_stage();

  struct Timing {
    std::string stage;
    double seconds = 0.0;
    AllocationCounts allocations;  // Storage::allocate calls during the stage, per device type
    // Device -> host copies (core's device_to_host_copies) between the stage's first and last
    // completed step: what its steps after the first read back (0 on a GPU run).
    int64_t step_read_backs = 0;
  };
  const std::vector<Timing>& timings() const { return timings_; }
  double total_seconds() const;
  // "timings: text encoding 0.4 s, stage 1 3.1 s, ..., total 5.2 s"
  std::string summary() const;

  // "1:05", "0:07", "1:02:03"
  static std::string format_duration(double seconds);

 private:
  using Clock = std::chrono::steady_clock;
  std::FILE* out_;
  Mode mode_;
  const CancelToken* cancel_ = nullptr;
  std::optional<Deadline> deadline_;
  ProgressListener listener_;
  Clock::time_point start_;
  std::string current_;
  Clock::time_point stage_start_;
  AllocationCounts stage_allocations_;  // the counts when the stage started
  int64_t step_mark_ = -1;              // device_to_host_copies() at the last completed step
  int64_t stage_step_read_backs_ = 0;
  bool in_stage_ = false;
  bool bar_drawn_ = false;  // a bar line without its newline is on screen
  std::vector<Timing> timings_;

  void draw(int64_t done, int64_t total, double elapsed);
  // Throws when the token was requested or the deadline passed; `where` is built only then.
  template <class Where>
  void check_stop(const Where& where) const {
    if (cancel_ != nullptr && cancel_->requested()) cancel_->check(where());
    if (deadline_ && deadline_->passed()) deadline_->check(where());
  }
  void notify(ProgressEvent::Kind kind, int64_t done, int64_t total, double stage_seconds);
};

}  // namespace ltx::generate
