#include "core/env_settings.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <sstream>

#include <unistd.h>  // environ

#include "core/error.h"

namespace ltx::env {

namespace {

// A row of the table: what --help-env shows, and how a set value lands in Settings. `parse` gets
// the value (the default when the variable is unset or empty) and throws on a bad one.
struct Row {
  Variable var;
  void (*parse)(const Variable& var, std::string_view value, Settings& s);
};

[[noreturn]] void reject(const Variable& var, std::string_view value) {
  fail(var.name, "=", value, " is not valid: expected ", var.allowed, " (", var.doc,
       "; `ltx --help-env` lists every variable)");
}

bool parse_switch(const Variable& var, std::string_view value) {
  if (value == "0") return false;
  if (value == "1") return true;
  reject(var, value);
}

int parse_count(const Variable& var, std::string_view value, int lo, int hi) {
  int n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  const bool whole = ec == std::errc() && end == value.data() + value.size();
  if (!whole || n < lo || n > hi) reject(var, value);
  return n;
}

// The parser of a 0 / 1 variable that sets one Settings field.
template <bool Settings::*kField>
void set_switch(const Variable& var, std::string_view value, Settings& s) {
  s.*kField = parse_switch(var, value);
}

const std::vector<Row>& rows() {
  static const std::vector<Row> table = {
      {{"LTX_NUM_THREADS", "count", "", "a whole number from 1 to 4096",
        "CPU worker threads of the thread pool; unset: one per hardware thread"},
       [](const Variable& v, std::string_view x, Settings& s) {
         s.num_threads = x.empty() ? std::nullopt : std::optional<int>(parse_count(v, x, 1, 4096));
       }},
      {{"LTX_SIDE_STREAMS", "switch", "1", "0 or 1",
        "CUDA: run independent work (each transformer block's audio half) on a second stream; 0 "
        "keeps one stream (same results bit for bit)"},
       set_switch<&Settings::side_streams>},
      {{"LTX_TUNING_CACHE", "path", "", "a file path, or 0 / off",
        "CUDA: the file keeping cuDNN's timed convolution choices between runs; unset: "
        "$XDG_CACHE_HOME/ltx/cudnn-conv-v1.json (else ~/.cache/ltx/...); 0 or off: memory only"},
       [](const Variable&, std::string_view x, Settings& s) {
         if (x.empty())
           s.tuning_cache = std::nullopt;
         else
           s.tuning_cache = x == "0" || x == "off" ? std::string() : std::string(x);
       }},
      {{"LTX_CUDNN_BACKEND", "switch", "1", "0 or 1",
        "CUDA: let cuDNN's backend-API engines compete with the legacy algorithm per conv "
        "geometry; 0 uses the legacy API only (a way out should a cuDNN version's engine "
        "misbehave)"},
       set_switch<&Settings::cudnn_backend>},
      {{"LTX_CUDNN_STATS", "switch", "0", "0 or 1",
        "CUDA diagnostic: at exit, print every cuDNN conv geometry with its calls, chosen path "
        "and times (bench/README.md)"},
       set_switch<&Settings::cudnn_stats>},
      {{"LTX_PROFILE_OPS", "choice", "0", "0, 1 or events",
        "`ltx` on CUDA: at exit, print GPU time per op; 1 synchronises around each op (slow), "
        "events times them with CUDA events and lists the gaps between ops (bench/README.md)"},
       [](const Variable& v, std::string_view x, Settings& s) {
         if (x == "0")
           s.op_profiling = OpProfiling::Off;
         else if (x == "1")
           s.op_profiling = OpProfiling::Sync;
         else if (x == "events")
           s.op_profiling = OpProfiling::Events;
         else
           reject(v, x);
       }},
      {{"LTX_CUDA_PROFILER_RANGE", "switch", "0", "0 or 1",
        "`ltx bench` on CUDA: make the timed calls the CUDA profiler's capture range (ncu "
        "--profile-from-start off, nsys --capture-range=cudaProfilerApi)"},
       set_switch<&Settings::cuda_profiler_range>},
      {{"XDG_CACHE_HOME", "standard", "", "a folder",
        "the per-user cache folder's parent: ltx keeps its cache in $XDG_CACHE_HOME/ltx (the demo "
        "bundle, the cuDNN tuning cache)",
        true},
       nullptr},
      {{"XDG_DATA_HOME", "standard", "", "a folder",
        "the per-user data folder's parent: `ltx serve` keeps its jobs in $XDG_DATA_HOME/ltx/serve "
        "unless --data-dir says otherwise",
        true},
       nullptr},
      {{"HF_ENDPOINT", "standard", "https://huggingface.co", "a URL",
        "the Hugging Face hub `ltx pull` and `--model` download from (a mirror, or a local hub), "
        "as in Hugging Face's own tools",
        true},
       nullptr},
      {{"HF_TOKEN", "standard", "", "a token",
        "the Hugging Face access token for gated repositories (Gemma, LTX-2.5); `--token` wins, "
        "without either the file `hf auth login` writes ($HF_HOME/token) is read",
        true},
       nullptr},
      {{"HF_HUB_OFFLINE", "standard", "", "1, true, yes or on",
        "use only files already downloaded (the ltx model cache and the Hugging Face cache), as "
        "`--offline`: a missing file is an error that lists what to pull",
        true},
       nullptr},
      {{"HF_HOME", "standard", "", "a folder",
        "Hugging Face's folder (default $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface): "
        "files already in its hub cache are used without a download, and its token file is read",
        true},
       nullptr},
      {{"HF_HUB_CACHE", "standard", "", "a folder",
        "Hugging Face's hub cache (default $HF_HOME/hub), searched before downloading a file",
        true},
       nullptr},
      {{"HOME", "standard", "", "a folder",
        "without XDG_CACHE_HOME / XDG_DATA_HOME: $HOME/.cache/ltx and $HOME/.local/share/ltx",
        true},
       nullptr},
  };
  return table;
}

std::optional<std::string> read(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

std::optional<std::string> read_non_empty(std::string_view name) {
  std::optional<std::string> v = read(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

}  // namespace

const std::vector<Variable>& variables() {
  static const std::vector<Variable> vars = [] {
    std::vector<Variable> out;
    for (const Row& r : rows()) out.push_back(r.var);
    return out;
  }();
  return vars;
}

Settings parse_settings(const Lookup& lookup) {
  Settings s;
  for (const Row& r : rows()) {
    if (r.parse == nullptr) continue;  // standard variables: read at use
    const std::optional<std::string> set = lookup(r.var.name);
    const std::string_view value =
        set && !set->empty() ? std::string_view(*set) : r.var.default_value;
    r.parse(r.var, value, s);
  }
  return s;
}

const Settings& settings() {
  // Parsed under the static's initialisation lock; a throw leaves it unset, so the next call
  // reports the same error.
  static const Settings s = parse_settings(read);
  return s;
}

std::string describe_variables() {
  std::ostringstream os;
  os << "Environment variables ltx reads (unset or empty: the default):\n";
  for (const Variable& v : variables()) {
    os << "\n" << v.name << "  (" << v.type;
    if (!v.default_value.empty()) os << ", default " << v.default_value;
    if (!v.standard) os << "; " << v.allowed;
    os << ")\n    " << v.doc << "\n";
  }
  return os.str();
}

std::vector<std::string> unknown_variables(const std::vector<std::string>& names) {
  // Read by the test suites (tests/support) and the Python tools (tools/), not by ltx.
  static constexpr std::string_view kReadElsewhere[] = {
      "LTX_FIXTURES_DIR", "LTX_BINARY", "LTX_GOLDEN_DIR", "LTX_REF", "LTX_REF_COMMIT",
      "LTX_FIXTURE_STASH"};
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (n.rfind("LTX_", 0) != 0) continue;
    const auto known = [&](std::string_view k) { return k == n; };
    if (std::any_of(std::begin(kReadElsewhere), std::end(kReadElsewhere), known)) continue;
    if (std::any_of(variables().begin(), variables().end(),
                    [&](const Variable& v) { return v.name == n; }))
      continue;
    out.push_back(n);
  }
  return out;
}

std::vector<std::string> environment_names() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    out.emplace_back(entry.substr(0, entry.find('=')));
  }
  return out;
}

std::optional<std::string> xdg_cache_home() { return read_non_empty("XDG_CACHE_HOME"); }
std::optional<std::string> xdg_data_home() { return read_non_empty("XDG_DATA_HOME"); }
std::optional<std::string> home() { return read_non_empty("HOME"); }
std::optional<std::string> hf_endpoint() { return read_non_empty("HF_ENDPOINT"); }
std::optional<std::string> hf_token() { return read_non_empty("HF_TOKEN"); }
std::optional<std::string> hf_home() { return read_non_empty("HF_HOME"); }
std::optional<std::string> hf_hub_cache() { return read_non_empty("HF_HUB_CACHE"); }

bool hf_hub_offline() {
  // huggingface_hub's rule: these values (any case) are true, anything else false.
  const std::optional<std::string> v = read_non_empty("HF_HUB_OFFLINE");
  if (!v) return false;
  std::string u = *v;
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u == "1" || u == "ON" || u == "YES" || u == "TRUE";
}

}  // namespace ltx::env
