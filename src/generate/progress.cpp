#include "generate/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/out_of_memory.h"

namespace ltx::generate {

Progress::Progress(std::FILE* out, Mode mode) : out_(out), mode_(mode), start_(Clock::now()) {
  if (mode_ == Mode::Auto)
    mode_ = (out_ != nullptr && isatty(fileno(out_))) ? Mode::Bar : Mode::Lines;
  if (out_ == nullptr) mode_ = Mode::Off;
}

Progress::~Progress() {
  if (in_stage_) set_memory_stage("");
  if (bar_drawn_) std::fputc('\n', out_);
}

void Progress::stage(const std::string& name) {
  if (in_stage_ && name == current_) return;  // a step report follows, which checks the token
  check_stop([&] { return str("the start of ", name); });
  end_stage();
  current_ = name;
  set_memory_stage(name);
  stage_start_ = Clock::now();
  stage_allocations_ = allocation_counts();
  step_mark_ = -1;
  stage_step_read_backs_ = 0;
  in_stage_ = true;
  if (mode_ != Mode::Off) {
    std::fprintf(out_, "ltx: %s ...\n", name.c_str());
    std::fflush(out_);
  }
  notify(ProgressEvent::Kind::StageStart, 0, 0, 0.0);
}

void Progress::notify(ProgressEvent::Kind kind, int64_t done, int64_t total, double stage_seconds) {
  if (!listener_) return;
  ProgressEvent e;
  e.kind = kind;
  e.stage = current_;
  e.done = done;
  e.total = total;
  e.stage_seconds = stage_seconds;
  e.total_seconds = total_seconds();
  listener_(e);
}

void Progress::step(int64_t done, int64_t total) {
  check_stop([&] { return in_stage_ ? str(current_, ", step ", done, "/", total) : "a step"; });
  if (in_stage_ && done >= 1) {
    const int64_t now = device_to_host_copies();
    if (step_mark_ >= 0) stage_step_read_backs_ += now - step_mark_;
    step_mark_ = now;
  }
  if (!in_stage_ || total <= 0) return;
  done = std::clamp<int64_t>(done, 0, total);
  const double elapsed = std::chrono::duration<double>(Clock::now() - stage_start_).count();
  if (mode_ != Mode::Off) draw(done, total, elapsed);
  notify(ProgressEvent::Kind::Step, done, total, elapsed);
}

void Progress::draw(int64_t done, int64_t total, double elapsed) {
  const std::string eta =
      done > 0
          ? format_duration(elapsed * static_cast<double>(total - done) / static_cast<double>(done))
          : "?";
  if (mode_ == Mode::Lines) {
    if (done == 0) return;  // the stage line said it started
    std::fprintf(out_, "ltx: %s: step %lld/%lld, %s elapsed, eta %s\n", current_.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total),
                 format_duration(elapsed).c_str(), eta.c_str());
  } else {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / total);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    std::fprintf(out_, "\r\033[K%s [%s] %lld/%lld %3d%% %s<%s", current_.c_str(), bar.c_str(),
                 static_cast<long long>(done), static_cast<long long>(total),
                 static_cast<int>(100 * done / total), format_duration(elapsed).c_str(),
                 eta.c_str());
    bar_drawn_ = true;
    if (done == total) {
      std::fputc('\n', out_);
      bar_drawn_ = false;
    }
  }
  std::fflush(out_);
}

void Progress::end_stage() {
  if (!in_stage_) return;
  in_stage_ = false;
  set_memory_stage("");
  const double s = std::chrono::duration<double>(Clock::now() - stage_start_).count();
  const AllocationCounts now = allocation_counts();
  const AllocationCounts made{now.host - stage_allocations_.host, now.cuda - stage_allocations_.cuda};
  // A stage entered twice (e.g. "decode" per chunk) accumulates.
  auto it = std::find_if(timings_.begin(), timings_.end(),
                         [&](const Timing& t) { return t.stage == current_; });
  if (it == timings_.end()) {
    timings_.push_back({current_, s, made, stage_step_read_backs_});
  } else {
    it->seconds += s;
    it->allocations.host += made.host;
    it->allocations.cuda += made.cuda;
    it->step_read_backs += stage_step_read_backs_;
  }
  if (bar_drawn_) {
    std::fputc('\n', out_);
    bar_drawn_ = false;
  }
  notify(ProgressEvent::Kind::StageEnd, 0, 0, s);
}

double Progress::total_seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

std::string Progress::summary() const {
  std::string s = "timings:";
  const char* sep = " ";
  for (const Timing& t : timings_) {
    s += str(sep, t.stage, " ", std::round(t.seconds * 10.0) / 10.0, " s");
    sep = ", ";
  }
  return s + str(sep, "total ", std::round(total_seconds() * 10.0) / 10.0, " s");
}

std::string Progress::format_duration(double seconds) {
  if (!(seconds >= 0.0) || !std::isfinite(seconds)) return "?";
  const long long t = std::llround(seconds);
  const long long h = t / 3600, m = (t / 60) % 60, sec = t % 60;
  char buf[32];
  if (h > 0)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", h, m, sec);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", m, sec);
  return buf;
}

}  // namespace ltx::generate
