#pragma once
// A fixture for the tests of the Python tools in tools/bench: a temporary folder per test and
// process (ctest runs tests in parallel), files written into it, and one tool run with its
// combined output. Skips where python3 is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include <unistd.h>

namespace ltx::test {

struct ToolRun {
  int status = 0;
  std::string out;
};

class PythonToolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("python3 -c pass > /dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
    dir_ = std::filesystem::temp_directory_path() /
           ("ltx_tool_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::filesystem::path write(const std::string& name, const std::string& text) {
    const std::filesystem::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }
  // python3 tools/bench/<tool> '<file>' <args>, stdout and stderr together.
  ToolRun run_tool(const std::string& tool, const std::filesystem::path& file, const std::string& args) {
    const std::filesystem::path script =
        std::filesystem::path(LTX_FIXTURES_DIR) / ".." / ".." / "tools" / "bench" / tool;
    const std::filesystem::path out = file.string() + ".out";
    const std::string cmd = "python3 '" + script.string() + "' '" + file.string() + "' " + args +
                            " > '" + out.string() + "' 2>&1";
    ToolRun r;
    r.status = std::system(cmd.c_str());
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    r.out = ss.str();
    return r;
  }
  std::filesystem::path dir_;
};

}  // namespace ltx::test
