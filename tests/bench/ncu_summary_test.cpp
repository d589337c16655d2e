// tools/bench/ncu_kernel_summary.py (bench/README.md, "Kernel by kernel"): on a small export in
// Nsight Compute's raw CSV form (a units row, thousands separators in the numbers) it sums the
// kernels' times per name and per name + launch shape, heaviest first; a file without the
// columns it needs is an error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

namespace ltx {
namespace {

namespace fs = std::filesystem;

const fs::path kScript = fs::path(LTX_FIXTURES_DIR) / ".." / ".." / "tools" / "bench" /
                         "ncu_kernel_summary.py";

struct ScriptRun {
  int status = 0;
  std::string out;
};

ScriptRun summarize(const fs::path& csv, const std::string& args) {
  const fs::path out = csv.string() + ".out";
  const std::string cmd = "python3 '" + kScript.string() + "' '" + csv.string() + "' " + args +
                          " > '" + out.string() + "' 2>&1";
  ScriptRun r;
  r.status = std::system(cmd.c_str());
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  r.out = ss.str();
  return r;
}

class NcuKernelSummary : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("python3 -c pass > /dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
    // One folder per test and process: ctest runs the tests in parallel.
    dir_ = fs::temp_directory_path() /
           ("ltx_ncu_summary_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }
  fs::path dir_;
};

TEST_F(NcuKernelSummary, SumsKernelTimesPerNameAndPerLaunchShape) {
  const fs::path csv = write("step.csv",
                             "\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"gpu__time_duration.sum\"\n"
                             "\"\",\"\",\"\",\"\",\"ns\"\n"
                             "\"0\",\"norm\",\"(256, 1, 1)\",\"(792, 1, 1)\",\"1,500\"\n"
                             "\"1\",\"gemm\",\"(384, 1, 1)\",\"(2, 66, 1)\",\"2,000,000\"\n"
                             "\"2\",\"norm\",\"(256, 1, 1)\",\"(126, 1, 1)\",\"500\"\n");
  const ScriptRun by_name = summarize(csv, "--by name");
  ASSERT_EQ(by_name.status, 0) << by_name.out;
  EXPECT_NE(by_name.out.find("3 kernels, 2.00 ms in all"), std::string::npos) << by_name.out;
  // Heaviest first; the two norm launches in one row of 2 calls, 1.0 us each.
  const size_t gemm = by_name.out.find("gemm"), norm = by_name.out.find("norm");
  ASSERT_NE(gemm, std::string::npos);
  ASSERT_NE(norm, std::string::npos);
  EXPECT_LT(gemm, norm);
  EXPECT_NE(by_name.out.find("     2       1.0"), std::string::npos) << by_name.out;

  // Per launch shape the two norm launches stay apart.
  const ScriptRun by_shape = summarize(csv, "--by shape");
  ASSERT_EQ(by_shape.status, 0) << by_shape.out;
  EXPECT_NE(by_shape.out.find("norm  grid (792, 1, 1) block (256, 1, 1)"), std::string::npos)
      << by_shape.out;
  EXPECT_NE(by_shape.out.find("norm  grid (126, 1, 1) block (256, 1, 1)"), std::string::npos)
      << by_shape.out;
}

TEST_F(NcuKernelSummary, FilesWithoutTheColumnsAreErrors) {
  const ScriptRun no_kernels = summarize(write("a.csv", "\"ID\",\"Duration\"\n\"0\",\"1\"\n"), "");
  EXPECT_NE(no_kernels.status, 0);
  EXPECT_NE(no_kernels.out.find("no 'Kernel Name' column"), std::string::npos) << no_kernels.out;
  const ScriptRun no_metric =
      summarize(write("b.csv", "\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\"\n"), "");
  EXPECT_NE(no_metric.status, 0);
  EXPECT_NE(no_metric.out.find("gpu__time_duration.sum"), std::string::npos) << no_metric.out;
}

}  // namespace
}  // namespace ltx
