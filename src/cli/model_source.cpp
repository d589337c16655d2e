#include "cli/model_source.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "core/cancel.h"
#include "core/error.h"
#include "core/log.h"
#include "generate/model_presets.h"

namespace ltx::cli {

namespace {

// SIGINT / SIGTERM during a download: the token stops it at once and the partial file stays for a
// resume. No SA_RESTART, so a wait on another process's lock is interrupted too.
CancelToken g_stop;
extern "C" void request_download_stop(int sig) { g_stop.request(sig); }

class StopDownloadsOnSignals {
 public:
  StopDownloadsOnSignals() {
    struct sigaction sa {};
    sa.sa_handler = request_download_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopDownloadsOnSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopDownloadsOnSignals(const StopDownloadsOnSignals&) = delete;
  StopDownloadsOnSignals& operator=(const StopDownloadsOnSignals&) = delete;

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

std::string duration(double s) {
  if (s < 0 || s > 1e7) return "?";
  const int64_t t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  return buf;
}

// Progress on stderr: one rewritten line on a terminal, a line every 10 s otherwise; nothing with
// --quiet.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(::isatty(STDERR_FILENO) == 1), on_(log_level() <= LogLevel::Info) {}

  void operator()(const hub::TransferProgress& p) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!tty_ && !p.verifying && now - last_ < std::chrono::seconds(10)) return;
    last_ = now;
    const double fetched = static_cast<double>(p.done - p.resumed_from);
    const double rate = p.seconds > 0 ? fetched / p.seconds : 0.0;
    const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : -1.0;
    const std::string line =
        p.verifying
            ? str(p.file.path, ": ", hub::human_bytes(p.total), " downloaded, verifying the digest")
            : str(p.file.path, ": ", hub::human_bytes(p.done), " / ", hub::human_bytes(p.total),
                  " (", p.total > 0 ? 100 * p.done / p.total : 100, "%), ",
                  hub::human_bytes(static_cast<int64_t>(rate)), "/s, ETA ", duration(eta),
                  p.resumed_from > 0 ? str(", resumed at ", hub::human_bytes(p.resumed_from)) : "");
    if (tty_)
      std::fprintf(stderr, "\r\033[K%s", line.c_str());
    else
      std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    open_line_ = tty_;
  }
  void end_line() {
    if (open_line_) std::fputs("\n", stderr);
    open_line_ = false;
  }

 private:
  bool tty_, on_;
  bool open_line_ = false;
  std::chrono::steady_clock::time_point last_{};
};

bool ask_yes(const std::string& question) {
  std::fprintf(stderr, "%s [y/N] ", question.c_str());
  std::fflush(stderr);
  std::string answer;
  if (!std::getline(std::cin, answer)) return false;
  return answer == "y" || answer == "Y" || answer == "yes" || answer == "Yes";
}

}  // namespace

void add_hub_flags(CLI::App* sub, HubFlags& f, bool with_yes) {
  sub->add_option("--cache-dir", f.cache_dir,
                  "Model cache folder (default $XDG_CACHE_HOME/ltx/models, else "
                  "~/.cache/ltx/models); files Hugging Face's own cache holds are used from there");
  sub->add_option("--token", f.token,
                  "Hugging Face access token for gated repositories (default: HF_TOKEN, else the "
                  "token `hf auth login` saved)");
  sub->add_flag("--offline", f.offline,
                "Use only files already downloaded; a missing one is an error listing what to pull "
                "(also HF_HUB_OFFLINE=1)");
  sub->add_option("--connections", f.connections,
                  "Parallel connections for one large file (default 4; 1: one stream)")
      ->check(CLI::Range(1, 32));
  if (with_yes)
    sub->add_flag("-y,--yes", f.yes, "Download the model files that are missing without asking");
}

hub::HubConfig hub_config(const HubFlags& f) { return hub::HubConfig::from_environment(f.token, f.offline); }

hub::ModelCache model_cache(const HubFlags& f) {
  return hub::ModelCache(f.cache_dir.empty() ? hub::ModelCache::default_root() : f.cache_dir);
}

std::vector<std::string> ensure_targets(const std::vector<hub::PullTarget>& targets,
                                        const HubFlags& flags, Confirm confirm, const std::string& why,
                                        std::vector<hub::TargetState>* states_out) {
  const hub::HubConfig hub = hub_config(flags);
  const hub::ModelCache cache = model_cache(flags);
  std::vector<hub::TargetState> states;
  for (const hub::PullTarget& t : targets) states.push_back(hub::inspect_target(hub, cache, t));

  std::string missing_list;
  int64_t missing_bytes = 0;
  size_t missing_files = 0;
  for (const hub::TargetState& s : states)
    for (size_t i = 0; i < s.missing.size(); ++i) {
      ++missing_files;
      missing_bytes = s.missing_sizes[i] < 0 || missing_bytes < 0 ? -1 : missing_bytes + s.missing_sizes[i];
      missing_list += str("\n  ", s.missing[i].str(),
                          s.missing_sizes[i] >= 0 ? " (" + hub::human_bytes(s.missing_sizes[i]) + ")" : "");
    }
  if (missing_files > 0) {
    LTX_CHECK(!hub.offline, why, ": ", missing_files, " file(s) are not downloaded and the hub is off "
              "limits (--offline or HF_HUB_OFFLINE):", missing_list,
              "\nrun `ltx pull` for them with the network first (cache: ", cache.root(), ")");
    if (confirm == Confirm::UnlessYes && !flags.yes) {
      const std::string question =
          str(why, " needs ", missing_files, " file(s) that are not downloaded (",
              hub::human_bytes(missing_bytes), "):", missing_list, "\nDownload them from ",
              hub.endpoint, " into ", cache.root(), "?");
      LTX_CHECK(::isatty(STDIN_FILENO) == 1, question.substr(0, question.find('?')),
                "\npass --yes to download them, or run `ltx pull` first");
      LTX_CHECK(ask_yes(question), why, ": not downloaded (answered no); `ltx pull` fetches them");
    }
  }

  std::vector<std::string> paths;
  ProgressPrinter printer;
  hub::DownloadOptions o;
  o.connections = flags.connections;
  o.cancel = &g_stop;
  o.progress = [&](const hub::TransferProgress& p) { printer(p); };
  o.notice = [&](const std::string& m) {
    printer.end_line();
    log_info("ltx: ", m);
  };
  const StopDownloadsOnSignals stop_on_signals;
  for (const hub::TargetState& s : states) {
    const auto start = std::chrono::steady_clock::now();
    std::string path;
    try {
      path = hub::fetch_target(hub, cache, s, o);
    } catch (...) {
      printer.end_line();
      throw;
    }
    printer.end_line();
    if (!s.missing.empty()) {
      int64_t bytes = 0;
      for (int64_t b : s.missing_sizes) bytes += std::max<int64_t>(b, 0);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      log_info("ltx: downloaded ", s.target.str(), " (", hub::human_bytes(bytes), ", ",
               duration(secs), ") to ", path);
    }
    paths.push_back(path);
  }
  if (states_out) *states_out = std::move(states);
  return paths;
}

void apply_model_preset(const hub::Preset& preset, generate::ModelFlags& models,
                        const generate::ComponentNeeds* needs, const HubFlags& flags) {
  const std::vector<hub::PresetFile> files = generate::preset_files_needed(preset, models, needs);
  std::vector<hub::PullTarget> targets;
  for (const hub::PresetFile& f : files)
    targets.push_back({std::string(f.repo), hub::kDefaultRevision, std::string(f.path)});
  const std::vector<std::string> paths =
      ensure_targets(targets, flags, Confirm::UnlessYes, "--model " + std::string(preset.name));
  generate::apply_preset_files(models, files, paths);
  for (size_t i = 0; i < files.size(); ++i)
    log_info("ltx: --model ", preset.name, ": ", hub::role_flag(files[i].role), " ", paths[i]);
}

}  // namespace ltx::cli
