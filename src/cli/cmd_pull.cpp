// `ltx pull PRESET|OWNER/NAME[:FILE...] ... [--cache-dir DIR] [--token T] [--offline] [--json]`:
// downloads model files into the model cache (hub/), resumably and verified, so that
// `ltx generate --model PRESET` (or the model flags pointed at the printed paths) runs without a
// network. Offline it only checks that everything is there.
#include <signal.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_source.h"
#include "core/cancel.h"
#include "core/error.h"
#include "core/log.h"
#include "hub/presets.h"

namespace ltx::cli {

namespace {

struct PullCli {
  std::vector<std::string> what;
  HubFlags hub;
  bool json = false;
};

int run_pull(const PullCli& c) {
  // Each argument: a preset (its files) or a repository / its files.
  std::vector<hub::PullTarget> targets;
  std::vector<std::string> labels;  // the argument each target came from
  for (const std::string& arg : c.what) {
    const hub::Preset* preset = hub::find_preset(arg);
    const std::vector<hub::PullTarget> t =
        preset ? hub::preset_targets(*preset) : hub::parse_pull_argument(arg);
    targets.insert(targets.end(), t.begin(), t.end());
    labels.insert(labels.end(), t.size(), arg);
  }
  std::vector<hub::TargetState> states;
  std::vector<std::string> paths;
  try {
    paths = ensure_targets(targets, c.hub, Confirm::No, "ltx pull", &states);
  } catch (const Cancelled& e) {
    std::fprintf(stderr, "ltx: stopped by %s: %s\n",
                 e.reason() == SIGINT ? "SIGINT" : e.reason() == SIGTERM ? "SIGTERM" : "a signal",
                 e.what());
    return 128 + e.reason();
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!c.json) std::printf("%s\t%s\n", targets[i].str().c_str(), paths[i].c_str());
    out.push_back({{"argument", labels[i]},
                   {"target", targets[i].str()},
                   {"path", paths[i]},
                   {"downloaded_files", states[i].missing.size()}});
  }
  if (c.json) std::printf("%s\n", nlohmann::json{{"files", out}}.dump(2).c_str());
  for (const std::string& arg : c.what)
    if (hub::find_preset(arg))
      log_info("ltx pull: ", arg, " is ready: ltx generate --model ", arg,
               " --device cuda --prompt \"...\" --output-path out.mp4");
  return 0;
}

}  // namespace

Command add_pull(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "pull",
      "Download model files into the model cache: a preset (`ltx models` lists them), a whole "
      "Hugging Face repository OWNER/NAME, or its files OWNER/NAME:FILE[:FILE...] (OWNER/NAME@REV "
      "for another revision than main). Resumes interrupted downloads and verifies every file "
      "against the hub's SHA-256 before it is used");
  auto c = std::make_shared<PullCli>();
  sub->add_option("what", c->what, "PRESET, OWNER/NAME or OWNER/NAME:FILE[:FILE...]")->required();
  add_hub_flags(sub, c->hub, false);
  sub->add_flag("--json", c->json, "Print the files and their local paths as JSON on stdout");
  return {sub, [c]() -> int { return run_pull(*c); }};
}

}  // namespace ltx::cli
