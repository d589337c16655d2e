#include "bench/cold_start.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "bench/model_files.h"
#include "bench/presets.h"
#include "core/error.h"
#include "media/support.h"

extern char** environ;

namespace ltx::bench {

namespace {

using Clock = std::chrono::steady_clock;

// The generation's stage that denoises first, as its progress lines name it.
constexpr const char* kDenoisingStart = "ltx: stage 1 ...";
constexpr const char* kFirstStep = "ltx: stage 1: step 1/";

std::string own_executable() {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
  LTX_CHECK(!ec, "ltx bench cold-start: cannot find this program's path (/proc/self/exe): ",
            ec.message());
  return p.string();
}

// Runs argv with stdout and stderr on one pipe; stamps each line; sends SIGINT once a line
// starting with `stop_after` arrived (empty: never). Kills the child after `limit_s`.
ColdStartRun run_child(const std::vector<std::string>& argv, const std::string& stop_after,
                       double limit_s) {
  int fds[2];
  LTX_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "ltx bench cold-start: pipe: ", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const auto start = Clock::now();
  const int rc = ::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    fail("ltx bench cold-start: cannot start ", argv[0], ": ", std::strerror(rc));
  }
  const auto since_start = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };

  ColdStartRun run;
  std::string pending;
  char buf[4096];
  bool open = true;
  while (open) {
    const double left = limit_s - since_start();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n <= 0) {
      open = n < 0 && errno == EINTR;
      continue;
    }
    const double now = since_start();
    pending.append(buf, static_cast<size_t>(n));
    for (size_t eol; (eol = pending.find('\n')) != std::string::npos; pending.erase(0, eol + 1)) {
      StampedLine line{now, pending.substr(0, eol)};
      if (run.first_output < 0) run.first_output = now;
      if (run.denoising_start < 0 && line.text == kDenoisingStart) run.denoising_start = now;
      if (run.first_step < 0 && line.text.starts_with(kFirstStep)) run.first_step = now;
      if (!stop_after.empty() && !run.interrupted && line.text.starts_with(stop_after)) {
        ::kill(pid, SIGINT);
        run.interrupted = true;
      }
      run.lines.push_back(std::move(line));
    }
  }
  if (!pending.empty()) run.lines.push_back({since_start(), pending});
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.exit_seconds = since_start();
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

std::string seconds(double s) {
  if (s < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f s", s);
  return b;
}

}  // namespace

ColdStartResult run_cold_start(const ColdStartOptions& o) {
  LTX_CHECK(!o.dir.empty(), "ltx bench cold-start needs --dir DIR: where the model files are "
            "(written there first when missing)");
  LTX_CHECK(o.runs >= 1, "--runs ", o.runs, ": must be at least 1");
  LTX_CHECK(!o.whole_clip || media::ffmpeg_available(),
            "--whole-clip writes the clip's MP4, and this build has no FFmpeg (configure with "
            "LTX_FFMPEG=ON), or leave --whole-clip out to stop after the first denoising step");
  const Preset preset = bench::preset(o.preset);
  ColdStartResult r;
  r.options = o;
  const ModelFileSet files =
      write_model_files(preset, o.dir, 0, [&](const std::string& path, double s) {
        std::fprintf(stderr, "ltx bench cold-start: wrote %s in %.1f s\n", path.c_str(), s);
        r.written.emplace_back(path, s);
      });
  r.files = {files.checkpoint, files.text_encoder, files.spatial_upsampler};

  const std::filesystem::path out_dir =
      std::filesystem::temp_directory_path() / ("ltx-cold-start-" + std::to_string(::getpid()));
  std::filesystem::create_directories(out_dir);
  // Removed however the runs end (the children write their MP4 there with --whole-clip).
  struct RemoveOnExit {
    std::filesystem::path dir;
    ~RemoveOnExit() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_out_dir{out_dir};
  std::vector<std::string> argv = {
      o.ltx_binary.empty() ? own_executable() : o.ltx_binary,
      "generate",
      "--prompt",
      "A red fox trots through fresh snow at dawn; the camera follows at ground level.",
      "--pipeline", o.pipeline,
      "--checkpoint-path", files.checkpoint,
      "--text-encoder-path", files.text_encoder,
      "--spatial-upsampler-path", files.spatial_upsampler,
      "--width", std::to_string(o.width),
      "--height", std::to_string(o.height),
      "--num-frames", std::to_string(o.frames),
      "--device", o.device,
      "--output-path", (out_dir / "clip.mp4").string()};
  argv.insert(argv.end(), o.extra_args.begin(), o.extra_args.end());
  for (int i = 0; i < o.runs; ++i) {
    ColdStartRun run = run_child(argv, o.whole_clip ? "" : kFirstStep, 1800);
    std::fprintf(stderr, "ltx bench cold-start: run %d: first denoising step after %s (exit %d)\n",
                 i + 1, seconds(run.first_step).c_str(), run.exit_code);
    const bool ok = run.first_step >= 0 &&
                    (run.exit_code == 0 || (run.interrupted && run.exit_code == 130));
    r.runs.push_back(std::move(run));
    if (!ok) {
      std::string tail;
      const auto& lines = r.runs.back().lines;
      for (size_t k = lines.size() > 12 ? lines.size() - 12 : 0; k < lines.size(); ++k)
        tail += "\n  " + lines[k].text;
      fail("ltx bench cold-start: `ltx generate` did not reach its first denoising step (exit ",
           r.runs.back().exit_code, "); its last lines:", tail);
    }
  }
  return r;
}

nlohmann::json cold_start_json(const ColdStartResult& r) {
  nlohmann::json j;
  j["preset"] = r.options.preset;
  j["pipeline"] = r.options.pipeline;
  j["device"] = r.options.device;
  j["size"] = {r.options.width, r.options.height, r.options.frames};
  j["extra_args"] = r.options.extra_args;
  j["files"] = r.files;
  j["written"] = nlohmann::json::array();
  for (const auto& [path, s] : r.written) j["written"].push_back({{"path", path}, {"seconds", s}});
  j["runs"] = nlohmann::json::array();
  for (const ColdStartRun& run : r.runs) {
    nlohmann::json lines = nlohmann::json::array();
    for (const StampedLine& l : run.lines) lines.push_back({{"seconds", l.seconds}, {"text", l.text}});
    j["runs"].push_back({{"first_output_s", run.first_output},
                         {"denoising_start_s", run.denoising_start},
                         {"first_step_s", run.first_step},
                         {"exit_s", run.exit_seconds},
                         {"exit_code", run.exit_code},
                         {"interrupted", run.interrupted},
                         {"lines", lines}});
  }
  return j;
}

std::string format_cold_start(const ColdStartResult& r) {
  std::ostringstream s;
  s << "ltx bench cold-start: " << r.options.preset << ", " << r.options.pipeline << " at "
    << r.options.width << "x" << r.options.height << "x" << r.options.frames << " on "
    << r.options.device;
  for (const std::string& a : r.options.extra_args) s << " " << a;
  s << "\n";
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const ColdStartRun& run = r.runs[i];
    s << "run " << (i + 1) << ": denoising starts " << seconds(run.denoising_start)
      << ", first step done " << seconds(run.first_step) << " after the process started (exit "
      << run.exit_code << (run.interrupted ? ", interrupted after the first step" : "") << ")\n";
    for (const StampedLine& l : run.lines) {
      char stamp[32];
      std::snprintf(stamp, sizeof stamp, "  [%7.2f s] ", l.seconds);
      s << stamp << l.text << "\n";
    }
  }
  return s.str();
}

}  // namespace ltx::bench
