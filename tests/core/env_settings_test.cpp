// The environment registry (core/env_settings.h): defaults, parsing, and the errors bad values get.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/env_settings.h"
#include "core/error.h"

namespace ltx {
namespace {

env::Settings parse(const std::map<std::string, std::string>& vars) {
  return env::parse_settings([&](std::string_view name) -> std::optional<std::string> {
    const auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

// The message of the error parsing `vars` throws ("" when none).
std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    parse(vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(EnvSettings, UnsetVariablesTakeTheDefaults) {
  const env::Settings s = parse({});
  EXPECT_FALSE(s.num_threads.has_value());
  EXPECT_TRUE(s.side_streams);
  EXPECT_FALSE(s.tuning_cache.has_value());
  EXPECT_TRUE(s.cudnn_backend);
  EXPECT_FALSE(s.cudnn_stats);
  EXPECT_EQ(s.op_profiling, env::OpProfiling::Off);
  EXPECT_FALSE(s.cuda_profiler_range);
}

TEST(EnvSettings, EmptyValuesAreUnset) {
  const env::Settings s = parse({{"LTX_NUM_THREADS", ""}, {"LTX_SIDE_STREAMS", ""},
                                 {"LTX_TUNING_CACHE", ""}, {"LTX_PROFILE_OPS", ""}});
  EXPECT_FALSE(s.num_threads.has_value());
  EXPECT_TRUE(s.side_streams);
  EXPECT_FALSE(s.tuning_cache.has_value());
  EXPECT_EQ(s.op_profiling, env::OpProfiling::Off);
}

TEST(EnvSettings, ParsesEveryKnob) {
  const env::Settings s = parse({{"LTX_NUM_THREADS", "12"},
                                 {"LTX_SIDE_STREAMS", "0"},
                                 {"LTX_TUNING_CACHE", "/tmp/choices.json"},
                                 {"LTX_CUDNN_BACKEND", "0"},
                                 {"LTX_CUDNN_STATS", "1"},
                                 {"LTX_PROFILE_OPS", "events"},
                                 {"LTX_CUDA_PROFILER_RANGE", "1"}});
  EXPECT_EQ(s.num_threads, 12);
  EXPECT_FALSE(s.side_streams);
  EXPECT_EQ(s.tuning_cache, "/tmp/choices.json");
  EXPECT_FALSE(s.cudnn_backend);
  EXPECT_TRUE(s.cudnn_stats);
  EXPECT_EQ(s.op_profiling, env::OpProfiling::Events);
  EXPECT_TRUE(s.cuda_profiler_range);
  EXPECT_EQ(parse({{"LTX_PROFILE_OPS", "1"}}).op_profiling, env::OpProfiling::Sync);
  EXPECT_EQ(parse({{"LTX_PROFILE_OPS", "0"}}).op_profiling, env::OpProfiling::Off);
}

TEST(EnvSettings, TuningCacheZeroOrOffKeepsChoicesInMemory) {
  EXPECT_EQ(parse({{"LTX_TUNING_CACHE", "0"}}).tuning_cache, "");
  EXPECT_EQ(parse({{"LTX_TUNING_CACHE", "off"}}).tuning_cache, "");
}

TEST(EnvSettings, ThreadCountBounds) {
  EXPECT_EQ(parse({{"LTX_NUM_THREADS", "1"}}).num_threads, 1);
  EXPECT_EQ(parse({{"LTX_NUM_THREADS", "4096"}}).num_threads, 4096);
  for (const char* bad : {"0", "-3", "4097", "8x", "eight", " 8", "8 ", "1e3", "99999999999"}) {
    const std::string e = error_of({{"LTX_NUM_THREADS", bad}});
    EXPECT_NE(e.find(std::string("LTX_NUM_THREADS=") + bad + " is not valid"), std::string::npos)
        << bad << ": " << e;
    EXPECT_NE(e.find("a whole number from 1 to 4096"), std::string::npos) << e;
  }
}

TEST(EnvSettings, BadValuesNameTheVariableTheValueAndWhatIsAllowed) {
  const std::string switches[] = {"LTX_SIDE_STREAMS", "LTX_CUDNN_BACKEND", "LTX_CUDNN_STATS",
                                  "LTX_CUDA_PROFILER_RANGE"};
  for (const std::string& name : switches) {
    for (const char* bad : {"2", "yes", "true", "on", "01"}) {
      const std::string e = error_of({{name, bad}});
      EXPECT_NE(e.find(name + "=" + bad + " is not valid: expected 0 or 1"), std::string::npos)
          << e;
      EXPECT_NE(e.find("ltx --help-env"), std::string::npos) << e;
    }
  }
  const std::string e = error_of({{"LTX_PROFILE_OPS", "sync"}});
  EXPECT_NE(e.find("LTX_PROFILE_OPS=sync is not valid: expected 0, 1 or events"), std::string::npos)
      << e;
}

TEST(EnvSettings, TheTableListsEveryVariableOnceWithItsDoc) {
  std::set<std::string> names;
  for (const env::Variable& v : env::variables()) {
    EXPECT_TRUE(names.insert(std::string(v.name)).second) << v.name << " is listed twice";
    EXPECT_FALSE(v.doc.empty()) << v.name;
    EXPECT_FALSE(v.type.empty()) << v.name;
    EXPECT_EQ(v.standard, v.type == "standard") << v.name;
  }
  const std::set<std::string> expected = {
      "LTX_NUM_THREADS", "LTX_SIDE_STREAMS",        "LTX_TUNING_CACHE", "LTX_CUDNN_BACKEND",
      "LTX_CUDNN_STATS", "LTX_PROFILE_OPS",         "LTX_CUDA_PROFILER_RANGE",
      "XDG_CACHE_HOME",  "XDG_DATA_HOME",           "HOME",
      "HF_ENDPOINT",     "HF_TOKEN",                "HF_HUB_OFFLINE",   "HF_HOME",
      "HF_HUB_CACHE"};
  EXPECT_EQ(names, expected);
  const std::string help = env::describe_variables();
  for (const std::string& name : names)
    EXPECT_NE(help.find("\n" + name + "  ("), std::string::npos) << name;
  EXPECT_NE(help.find("LTX_SIDE_STREAMS  (switch, default 1; 0 or 1)"), std::string::npos) << help;
  EXPECT_NE(help.find("HOME  (standard)"), std::string::npos) << help;
}

TEST(EnvSettings, HuggingFaceOfflineIsReadAsHuggingFaceReadsIt) {
  for (const char* on : {"1", "true", "TRUE", "yes", "On"}) {
    setenv("HF_HUB_OFFLINE", on, 1);
    EXPECT_TRUE(env::hf_hub_offline()) << on;
  }
  for (const char* off : {"0", "false", "no", "", "2"}) {
    setenv("HF_HUB_OFFLINE", off, 1);
    EXPECT_FALSE(env::hf_hub_offline()) << off;
  }
  unsetenv("HF_HUB_OFFLINE");
  EXPECT_FALSE(env::hf_hub_offline());
  setenv("HF_ENDPOINT", "http://127.0.0.1:1", 1);
  EXPECT_EQ(env::hf_endpoint(), std::optional<std::string>("http://127.0.0.1:1"));
  setenv("HF_ENDPOINT", "", 1);
  EXPECT_FALSE(env::hf_endpoint().has_value());
  unsetenv("HF_ENDPOINT");
}

TEST(EnvSettings, UnknownVariablesAreLtxNamesNoOneReads) {
  const std::vector<std::string> names = {"PATH", "LTX_NUM_THREADS", "LTX_ROW_PREFETCH",
                                          "LTX_FIXTURES_DIR", "LTX_REF", "LTX_NUM_THREAD",
                                          "XDG_CACHE_HOME", "LTXNOT"};
  EXPECT_EQ(env::unknown_variables(names),
            (std::vector<std::string>{"LTX_ROW_PREFETCH", "LTX_NUM_THREAD"}));
  EXPECT_TRUE(env::unknown_variables({}).empty());
}

TEST(EnvSettings, EnvironmentNamesListTheProcessEnvironment) {
  setenv("LTX_ENV_NAMES_PROBE", "x=y", 1);
  const std::vector<std::string> names = env::environment_names();
  unsetenv("LTX_ENV_NAMES_PROBE");
  EXPECT_NE(std::find(names.begin(), names.end(), "LTX_ENV_NAMES_PROBE"), names.end());
}

TEST(EnvSettings, StandardVariablesAreReadAtEachCall) {
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  setenv("XDG_CACHE_HOME", "/first", 1);
  EXPECT_EQ(env::xdg_cache_home(), "/first");
  setenv("XDG_CACHE_HOME", "/second", 1);
  EXPECT_EQ(env::xdg_cache_home(), "/second");
  setenv("XDG_CACHE_HOME", "", 1);
  EXPECT_FALSE(env::xdg_cache_home().has_value());
  if (saved)
    setenv("XDG_CACHE_HOME", saved->c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace ltx
