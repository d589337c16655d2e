#pragma once
// Every environment variable ltx reads, declared once (the table in env_settings.cpp: name, type,
// default, allowed values, one line of doc), parsed once and validated: a bad value is an
// ltx::Error naming the variable, the value and what is allowed, never a silent fallback.
// `ltx --help-env` prints the table; `ltx` checks every variable before it does anything else.
// This is the only place that calls getenv (the CTest check getenv_only_in_registry keeps it so).
// To add a knob: a field in Settings and a row in the table (docs/CONTRIBUTING.md).
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ltx::env {

enum class OpProfiling { Off, Sync, Events };

// The parsed values of ltx's own variables. An unset or empty variable takes its default.
struct Settings {
  std::optional<int> num_threads;           // LTX_NUM_THREADS; nullopt: one per hardware thread
  bool side_streams = true;                 // LTX_SIDE_STREAMS
  std::optional<std::string> tuning_cache;  // LTX_TUNING_CACHE; nullopt: the default file, "": off
  bool cudnn_backend = true;                // LTX_CUDNN_BACKEND
  bool cudnn_stats = false;                 // LTX_CUDNN_STATS
  OpProfiling op_profiling = OpProfiling::Off;  // LTX_PROFILE_OPS
  bool cuda_profiler_range = false;         // LTX_CUDA_PROFILER_RANGE
};

// One registered variable, as `ltx --help-env` lists it.
struct Variable {
  std::string_view name;
  std::string_view type;           // "switch", "count", "choice", "path", "standard"
  std::string_view default_value;  // "" where the default is described in `doc`
  std::string_view allowed;        // the values a bad setting's error lists
  std::string_view doc;
  bool standard = false;  // not ltx's own (XDG_CACHE_HOME, HOME, HF_*): read at each use, not validated
};

const std::vector<Variable>& variables();

// The process's settings: the environment parsed on first use (every variable at once), then
// cached. Throws ltx::Error naming the first bad variable, on every call until it is fixed.
const Settings& settings();

// Parses the settings from `lookup` (nullopt: unset) instead of the environment; what settings()
// does, for tests and for checking a configuration without a process around it.
using Lookup = std::function<std::optional<std::string>(std::string_view name)>;
Settings parse_settings(const Lookup& lookup);

// The table for people: one block per variable (name, type, default, allowed values, doc).
std::string describe_variables();

// Of `names` (environment variable names), those that look like ltx's own (LTX_...) but are
// neither registered nor read by ltx's tests and Python tools (LTX_FIXTURES_DIR, LTX_REF, ...):
// a typo or a knob that no longer exists, which would otherwise be ignored without a word.
std::vector<std::string> unknown_variables(const std::vector<std::string>& names);
// The names of the process's environment.
std::vector<std::string> environment_names();

// Standard variables, read at each call (callers and tests may change them while running);
// nullopt when unset or empty.
std::optional<std::string> xdg_cache_home();
std::optional<std::string> xdg_data_home();
std::optional<std::string> home();
// Hugging Face's own variables (read as huggingface_hub reads them; `ltx pull`, `--model`).
std::optional<std::string> hf_endpoint();
std::optional<std::string> hf_token();
std::optional<std::string> hf_home();
std::optional<std::string> hf_hub_cache();
bool hf_hub_offline();  // HF_HUB_OFFLINE is 1 / ON / YES / TRUE (any case)

}  // namespace ltx::env
