// `ltx models [PRESET...] [--json] [--offline] [--cache-dir DIR]`: the model presets of
// `ltx pull` / `--model`: what each is, which pipelines it runs, its licence, its files with the
// model flag each fills, and whether they are downloaded; sizes of what is missing come from the
// hub (not offline).
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_source.h"
#include "core/error.h"
#include "hub/presets.h"
#include "hub/pull.h"

namespace ltx::cli {

namespace {

struct ModelsCli {
  std::vector<std::string> names;
  HubFlags hub;
  bool json = false;
};

struct FileView {
  std::string status;  // "downloaded", "missing", "partly downloaded"
  int64_t bytes = -1;  // on disk when downloaded, else the hub's size (-1 unknown)
  std::string note;    // why the size is unknown
  std::string path;
};

int run_models(const ModelsCli& c) {
  const hub::HubConfig hub = hub_config(c.hub);
  const hub::ModelCache cache = model_cache(c.hub);
  std::vector<const hub::Preset*> shown;
  for (const std::string& n : c.names) shown.push_back(&hub::preset(n, "ltx models"));
  if (shown.empty())
    for (const hub::Preset& p : hub::presets()) shown.push_back(&p);

  std::map<std::string, FileView> seen;  // one look per file, shared by the presets
  auto view = [&](const hub::PresetFile& f) -> const FileView& {
    const hub::PullTarget t{std::string(f.repo), hub::kDefaultRevision, std::string(f.path)};
    auto it = seen.find(t.str());
    if (it != seen.end()) return it->second;
    FileView v;
    try {
      const hub::TargetState s = hub::inspect_target(hub, cache, t);
      v.path = s.local_path;
      v.status = s.missing.empty() ? "downloaded" : s.missing.size() < s.files.size() ? "partly downloaded" : "missing";
      v.bytes = s.present_bytes;
      for (int64_t b : s.missing_sizes) v.bytes = b < 0 || v.bytes < 0 ? -1 : v.bytes + b;
      if (v.bytes < 0) v.note = "size unknown offline";
    } catch (const Error& e) {
      // The size stays unknown; the reason in a few words (`ltx pull` gives the whole message).
      const std::string what = e.what();
      v.status = "missing";
      v.note = what.find("gated") != std::string::npos || what.find("refused the token") != std::string::npos
                   ? "gated: accept its terms on the hub, then --token or HF_TOKEN"
                   : what.substr(0, 160);
    }
    return seen.emplace(t.str(), v).first->second;
  };

  nlohmann::json out = nlohmann::json::array();
  for (const hub::Preset* p : shown) {
    nlohmann::json files = nlohmann::json::array();
    int64_t total = 0;
    bool all = true;
    if (!c.json)
      std::printf("%s  %s\n  default pipeline: %s; runs: %s%s\n  licence: %s\n", std::string(p->name).c_str(),
                  std::string(p->model).c_str(), std::string(p->default_pipeline).c_str(),
                  std::string(p->pipelines).c_str(),
                  p->quantization.empty() ? "" : str("; --quantization ", p->quantization, " by default").c_str(),
                  std::string(p->licence).c_str());
    for (const hub::PresetFile& f : p->files) {
      const FileView& v = view(f);
      total = v.bytes < 0 || total < 0 ? -1 : total + v.bytes;
      all = all && v.status == "downloaded";
      const std::string where = std::string(f.repo) + (f.path.empty() ? " (whole repository)" : ":" + std::string(f.path));
      if (!c.json)
        std::printf("    %-26s %s  %s, %s%s\n", hub::role_flag(f.role), where.c_str(),
                    hub::human_bytes(v.bytes).c_str(), v.status.c_str(),
                    v.note.empty() ? "" : (" (" + v.note + ")").c_str());
      files.push_back({{"flag", hub::role_flag(f.role)},
                       {"repo", f.repo},
                       {"path", f.path},
                       {"bytes", v.bytes},
                       {"status", v.status},
                       {"local_path", v.status == "downloaded" ? v.path : ""},
                       {"note", v.note}});
    }
    if (!c.json)
      std::printf("  total %s, %s\n\n", hub::human_bytes(total).c_str(),
                  all ? "downloaded" : str("`ltx pull ", p->name, "` downloads it").c_str());
    out.push_back({{"name", p->name},
                   {"model", p->model},
                   {"default_pipeline", p->default_pipeline},
                   {"pipelines", p->pipelines},
                   {"quantization", p->quantization},
                   {"licence", p->licence},
                   {"bytes", total},
                   {"downloaded", all},
                   {"files", files}});
  }
  if (c.json) std::printf("%s\n", nlohmann::json{{"presets", out}}.dump(2).c_str());
  return 0;
}

}  // namespace

Command add_models(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "models",
      "List the model presets of `ltx pull` and `--model`: the model, the pipelines it runs, its "
      "licence, its files (with the flag each fills), their sizes and whether they are downloaded");
  auto c = std::make_shared<ModelsCli>();
  sub->add_option("presets", c->names, "Only these presets");
  add_hub_flags(sub, c->hub, false);
  sub->add_flag("--json", c->json, "Print the presets as JSON on stdout");
  return {sub, [c]() -> int { return run_models(*c); }};
}

}  // namespace ltx::cli
