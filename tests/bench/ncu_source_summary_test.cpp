// tools/bench/ncu_source_summary.py (bench/README.md, "Instruction by instruction"): on a small
// export in the form of Nsight Compute's source page (a "Kernel Name" row per launch, then the
// SASS lines with their executed counts, thousands separators, a launch printed twice) it groups
// each kernel's instructions by execution count, keeps each name's largest launch, and lists the
// lines of one count; a file without the sections or columns it needs is an error.
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
                         "ncu_source_summary.py";

struct ScriptRun {
  int status = 0;
  std::string out;
};

class NcuSourceSummary : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("python3 -c pass > /dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
    // One folder per test and process: ctest runs the tests in parallel.
    dir_ = fs::temp_directory_path() /
           ("ltx_ncu_source_" +
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
  fs::path dir_;
};

const char* kHeader =
    "\"Address\",\"Source\",\"# Samples\",\"Instructions Executed\"\n";

// A launch of `norm`: two lines per chunk (8,000 executions each), one per row (1,000), one
// never run.
std::string norm_launch(const std::string& chunk_count) {
  return std::string("\"Kernel Name\",\"void norm<(int)4>(Args)\",\n") + kHeader +
         "\"0x7f0000000010\",\"      LDS.128 R4, [R2]\",\"30\",\"" + chunk_count + "\"\n" +
         "\"0x7f0000000020\",\"      F2FP.BF16.F32.PACK_AB R8, R5, R4\",\"10\",\"" + chunk_count +
         "\"\n"
         "\"0x7f0000000030\",\"      BAR.SYNC.DEFER_BLOCKING 0x0\",\"50\",\"1,000\"\n"
         "\"0x7f0000000040\",\"      BRA 0x7f0000000040\",\"0\",\"0\"\n";
}

TEST_F(NcuSourceSummary, GroupsEachKernelsLargestLaunchByExecutionCount) {
  const std::string big = norm_launch("8,000");
  const fs::path csv = write(
      "norms.csv", norm_launch("80") + big + big +  // a small launch, then the large one twice
                       "\"Kernel Name\",\"void rope(Args)\",\n" + kHeader +
                       "\"0x7f0000000100\",\"      FFMA R1, R2, R3, R1\",\"5\",\"100\"\n");
  const ScriptRun r = summarize(csv, "--elements 512000");
  ASSERT_EQ(r.status, 0) << r.out;
  // The large launch: 17,000 warp instructions, 32 x 17,000 / 512,000 = 1.06 per element; the
  // repeated section counted once.
  EXPECT_NE(r.out.find("0.02 M warp instructions, 1.1 thread instructions per element, 90 stall samples"),
            std::string::npos)
      << r.out;
  // Per-chunk lines first (16,000 of 17,000 instructions), then the per-row line.
  const size_t chunk = r.out.find("        8000      2     0.016  94.1%       40");
  const size_t row = r.out.find("        1000      1     0.001   5.9%       50");
  ASSERT_NE(chunk, std::string::npos) << r.out;
  ASSERT_NE(row, std::string::npos) << r.out;
  EXPECT_LT(chunk, row);
  // The heavier kernel first; the small norm launch left out without --all.
  EXPECT_LT(r.out.find("void norm"), r.out.find("void rope"));
  EXPECT_EQ(r.out.find("          80      2"), std::string::npos) << r.out;

  const ScriptRun all = summarize(csv, "--all");
  ASSERT_EQ(all.status, 0) << all.out;
  EXPECT_NE(all.out.find("          80      2"), std::string::npos) << all.out;
  const size_t first = all.out.find("        8000      2");  // the repeated section once
  ASSERT_NE(first, std::string::npos) << all.out;
  EXPECT_EQ(all.out.find("        8000      2", first + 1), std::string::npos) << all.out;

  const ScriptRun show = summarize(csv, "--show 8000");
  ASSERT_EQ(show.status, 0) << show.out;
  EXPECT_NE(show.out.find("000010     30  LDS.128 R4, [R2]"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("F2FP.BF16.F32.PACK_AB R8, R5, R4"), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find("BAR.SYNC"), std::string::npos) << show.out;  // ran 1,000 times
}

TEST_F(NcuSourceSummary, FilesWithoutTheSectionsOrColumnsAreErrors) {
  const ScriptRun raw = summarize(write("raw.csv", "\"ID\",\"Kernel Name\"\n\"0\",\"norm\"\n"), "");
  EXPECT_NE(raw.status, 0);
  EXPECT_NE(raw.out.find("no 'Kernel Name' sections"), std::string::npos) << raw.out;
  const ScriptRun no_counts = summarize(
      write("b.csv", "\"Kernel Name\",\"norm\",\n\"Address\",\"Source\"\n\"0x1\",\"NOP\"\n"), "");
  EXPECT_NE(no_counts.status, 0);
  EXPECT_NE(no_counts.out.find("no 'Instructions Executed' column"), std::string::npos)
      << no_counts.out;
}

}  // namespace
}  // namespace ltx
