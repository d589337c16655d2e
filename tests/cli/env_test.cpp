// `ltx --help-env` and the start-up check of the environment registry (core/env_settings.h), run
// through the built binary (LTX_BINARY).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/env_settings.h"
#include "io/io_test_util.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::env_test {
namespace {

using test::TempDir;

// Sets an environment variable for the scope (the child `ltx` inherits it), then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (saved_)
      setenv(name_, saved_->c_str(), 1);
    else
      unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(EnvCli, HelpEnvListsEveryRegisteredVariable) {
  TempDir dir;
  const test::CliResult r = test::run_ltx(dir, {"--help-env"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const env::Variable& v : env::variables()) {
    EXPECT_NE(r.out.find(std::string(v.name) + "  (" + std::string(v.type)), std::string::npos)
        << v.name << "\n" << r.out;
    EXPECT_NE(r.out.find(std::string(v.doc)), std::string::npos) << v.name;
  }
}

TEST(EnvCli, HelpEnvWorksWithABadVariableSet) {
  const ScopedEnv bad("LTX_SIDE_STREAMS", "maybe");
  TempDir dir;
  const test::CliResult r = test::run_ltx(dir, {"--help-env"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("LTX_SIDE_STREAMS"), std::string::npos);
}

TEST(EnvCli, ABadValueFailsBeforeAnyWorkWithOneLineNamingTheVariable) {
  const std::string file = test::fixture("tiny_ltx2_19b.safetensors");
  TempDir dir;
  {
    const test::CliResult ok = test::run_ltx(dir, {"inspect", file});
    ASSERT_EQ(ok.code, 0) << ok.err;
  }
  for (const auto& [name, value] : {std::pair<const char*, const char*>{"LTX_NUM_THREADS", "many"},
                                    {"LTX_PROFILE_OPS", "yes"},
                                    {"LTX_CUDNN_BACKEND", "2"}}) {
    const ScopedEnv bad(name, value);
    const test::CliResult r = test::run_ltx(dir, {"inspect", file});
    EXPECT_EQ(r.code, 1) << name;
    EXPECT_EQ(r.out, "") << name;  // nothing was inspected
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.rfind(str("ltx: error: ", name, "=", value, " is not valid: expected "), 0), 0u)
        << r.err;
  }
}

TEST(EnvCli, ValidValuesRun) {
  const ScopedEnv threads("LTX_NUM_THREADS", "2");
  const ScopedEnv profile("LTX_PROFILE_OPS", "1");  // CPU run: no op reaches CUDA, no table
  TempDir dir;
  const test::CliResult r =
      test::run_ltx(dir, {"inspect", test::fixture("tiny_ltx2_19b.safetensors")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

// A removed knob or a typo is not silently ignored: one warning line naming it, and the run goes on.
TEST(EnvCli, AnUnknownLtxVariableIsNamedInAWarning) {
  const ScopedEnv removed("LTX_ROW_MIN_BLOCKS", "8");
  TempDir dir;
  const test::CliResult r =
      test::run_ltx(dir, {"inspect", test::fixture("tiny_ltx2_19b.safetensors")});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("LTX_ROW_MIN_BLOCKS is set, but ltx reads no such variable"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--help-env"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ltx::env_test
