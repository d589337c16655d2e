// `ltx inspect FILE... [--json]`: describes checkpoint files (components, model version, parameter
// counts, dtypes, key config values). Every file is checked completely before anything about it is
// printed; a file that fails gives one error line on stderr naming it (and nothing on stdout), the
// others are still reported, and the exit code is 1 if any file failed.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "io/checkpoint.h"

namespace ltx::cli {

namespace {

struct InspectOptions {
  std::vector<std::string> files;
  bool json = false;
};

int run_inspect(const InspectOptions& opt) {
  int rc = 0;
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  bool first = true;
  for (const std::string& path : opt.files) {
    std::string text;
    try {
      io::CheckpointSummary s = io::inspect_checkpoint(path);
      if (opt.json)
        all.push_back(io::to_json(s));
      else
        text = io::to_text(s);
    } catch (const Error& e) {
      std::fprintf(stderr, "ltx: error: %s\n", e.what());
      rc = 1;
      continue;
    }
    if (!opt.json) {
      if (!first) std::cout << "\n";
      std::cout << text << std::flush;
      first = false;
    }
  }
  if (opt.json) std::cout << all.dump(2) << std::endl;
  return rc;
}

}  // namespace

Command add_inspect(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "inspect",
      "Describe checkpoint files: components, model version, parameters, dtypes, config");
  auto opt = std::make_shared<InspectOptions>();
  sub->add_option("files", opt->files,
                  "safetensors files (checkpoints, VAEs, text encoders, LoRAs, ...)")
      ->required();
  sub->add_flag("--json", opt->json, "Print one JSON array (one object per file) instead of text");
  return {sub, [opt]() -> int { return run_inspect(*opt); }};
}

}  // namespace ltx::cli
