#include "server/progress_plan.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ltx::server {

namespace {
constexpr double kLoadWeight = 5, kTextWeight = 5, kUpsampleWeight = 2, kDecodeWeight = 10,
                 kAudioDecodeWeight = 2;
}  // namespace

ProgressPlan::ProgressPlan(std::vector<Stage> stages) : stages_(std::move(stages)) {
  LTX_CHECK(!stages_.empty(), "a progress plan needs at least one stage");
  for (const Stage& s : stages_) {
    LTX_CHECK(std::isfinite(s.weight) && s.weight > 0, "progress plan stage '", s.name,
              "' has weight ", s.weight, "; weights must be positive");
    start_.push_back(total_);
    total_ += s.weight;
  }
}

double ProgressPlan::percent_at(size_t index, double fraction) const {
  LTX_CHECK(index < stages_.size(), "progress plan stage ", index, " of ", stages_.size());
  fraction = std::clamp(fraction, 0.0, 1.0);
  return 100.0 * (start_[index] + stages_[index].weight * fraction) / total_;
}

std::optional<size_t> ProgressPlan::find(const std::string& name, size_t from) const {
  for (size_t i = from; i < stages_.size(); ++i)
    if (stages_[i].name == name) return i;
  return std::nullopt;
}

ProgressPlan standard_progress_plan(const StandardPlan& plan) {
  LTX_CHECK(!plan.denoising.empty(), "a progress plan needs at least one denoising stage");
  LTX_CHECK(plan.load_share >= 0 && plan.load_share <= 1, "load_share ", plan.load_share,
            " is outside 0..1");
  const double load = kLoadWeight * plan.load_share;
  const double fixed = load + kTextWeight + kDecodeWeight + (plan.upsample ? kUpsampleWeight : 0);
  double cost = 0;
  for (const DenoisingStage& d : plan.denoising) {
    LTX_CHECK(d.steps > 0 && d.tokens > 0, "denoising stage '", d.name, "' has ", d.steps,
              " steps over ", d.tokens, " tokens; both must be positive");
    cost += static_cast<double>(d.steps) * static_cast<double>(d.tokens);
  }
  std::vector<ProgressPlan::Stage> stages = {{"text encoding", kTextWeight}};
  if (load > 0) stages.push_back({"model loading", load});
  for (size_t i = 0; i < plan.denoising.size(); ++i) {
    const DenoisingStage& d = plan.denoising[i];
    const double share = static_cast<double>(d.steps) * static_cast<double>(d.tokens) / cost;
    stages.push_back({d.name, (100.0 - fixed) * share});
    if (i == 0 && plan.upsample) stages.push_back({"upsample", kUpsampleWeight});
  }
  if (plan.audio) stages.push_back({"audio decode", kAudioDecodeWeight});
  stages.push_back({"video decode", kDecodeWeight - (plan.audio ? kAudioDecodeWeight : 0)});
  return ProgressPlan(std::move(stages));
}

std::optional<int> ProgressTracker::update(const std::string& stage, int64_t done, int64_t total) {
  // An event naming the current stage belongs to it, unless its count went back (the stage ran to
  // its end and a stage of the same name started: DFR's rounds), which is the next occurrence.
  std::optional<size_t> index;
  if (matched_ && plan_.stages()[cursor_].name == stage) {
    index = cursor_;
    if (done < last_done_) {
      if (auto next = plan_.find(stage, cursor_ + 1)) index = next;
    }
  }
  if (!index) index = plan_.find(stage, matched_ ? cursor_ + 1 : 0);
  if (!index) return std::nullopt;
  cursor_ = *index;
  matched_ = true;
  last_done_ = done;
  const double fraction =
      total > 0 ? static_cast<double>(std::clamp<int64_t>(done, 0, total)) / static_cast<double>(total)
                : 0.0;
  const int p =
      std::min(kMaxWhileRunning, static_cast<int>(std::floor(plan_.percent_at(*index, fraction))));
  if (p <= percent_) return std::nullopt;
  percent_ = p;
  return p;
}

}  // namespace ltx::server
