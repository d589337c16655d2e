#pragma once
// The hub flags `ltx pull`, `ltx models`, `ltx generate --model` and `ltx serve --model` share
// (--cache-dir, --token, --offline, --yes), and fetching what they name with progress on stderr.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "generate/components.h"
#include "generate/model_paths.h"
#include "hub/pull.h"

namespace ltx::cli {

struct HubFlags {
  std::string cache_dir;  // empty: ModelCache::default_root()
  std::string token;      // empty: HF_TOKEN, else $HF_HOME/token
  bool offline = false;
  bool yes = false;  // download what is missing without asking
  int connections = 4;
};

// --cache-dir, --token, --offline, --connections; --yes when `with_yes`.
void add_hub_flags(CLI::App* sub, HubFlags& flags, bool with_yes);
hub::HubConfig hub_config(const HubFlags& flags);
hub::ModelCache model_cache(const HubFlags& flags);

enum class Confirm { No, UnlessYes };

// Every target on disk: inspected, then (after asking, with Confirm::UnlessYes and no --yes)
// downloaded with progress on stderr. Returns the local paths in the targets' order. Offline, a
// missing file is an error listing everything missing. Ctrl-C / SIGTERM stop a download with
// ltx::Cancelled (its partial file kept). `why` names the command for messages ("--model X").
std::vector<std::string> ensure_targets(const std::vector<hub::PullTarget>& targets,
                                        const HubFlags& flags, Confirm confirm, const std::string& why,
                                        std::vector<hub::TargetState>* states = nullptr);

// --model PRESET for generate (the files its pipeline uses: `needs` from its options) and serve
// (every file: `needs` null): fetches them as ensure_targets does and fills the model flags no
// explicit flag gave. --quantization is the caller's (the preset's when none is given).
void apply_model_preset(const hub::Preset& preset, generate::ModelFlags& models,
                        const generate::ComponentNeeds* needs, const HubFlags& flags);

}  // namespace ltx::cli
