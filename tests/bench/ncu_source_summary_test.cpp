// tools/bench/ncu_source_summary.py (bench/README.md, "Instruction by instruction"): on a small
// export in the form of Nsight Compute's source page (a "Kernel Name" row per launch, then the
// SASS lines with their executed counts, thousands separators, a launch printed twice) it groups
// each kernel's instructions by execution count, keeps each name's largest launch, and lists the
// lines of one count; a file without the sections or columns it needs is an error.
#include <gtest/gtest.h>

#include <string>

#include "bench/python_tool_test.h"

namespace ltx::ncu_source_summary_test {
namespace {

using test::ToolRun;

using NcuSourceSummary = test::PythonToolTest;
constexpr const char* kTool = "ncu_source_summary.py";

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
  const auto csv = write(
      "norms.csv", norm_launch("80") + big + big +  // a small launch, then the large one twice
                       "\"Kernel Name\",\"void rope(Args)\",\n" + kHeader +
                       "\"0x7f0000000100\",\"      FFMA R1, R2, R3, R1\",\"5\",\"100\"\n");
  const ToolRun r = run_tool(kTool, csv, "--elements 512000");
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

  const ToolRun all = run_tool(kTool, csv, "--all");
  ASSERT_EQ(all.status, 0) << all.out;
  EXPECT_NE(all.out.find("          80      2"), std::string::npos) << all.out;
  const size_t first = all.out.find("        8000      2");  // the repeated section once
  ASSERT_NE(first, std::string::npos) << all.out;
  EXPECT_EQ(all.out.find("        8000      2", first + 1), std::string::npos) << all.out;

  const ToolRun show = run_tool(kTool, csv, "--show 8000");
  ASSERT_EQ(show.status, 0) << show.out;
  EXPECT_NE(show.out.find("000010     30  LDS.128 R4, [R2]"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("F2FP.BF16.F32.PACK_AB R8, R5, R4"), std::string::npos) << show.out;
  EXPECT_EQ(show.out.find("BAR.SYNC"), std::string::npos) << show.out;  // ran 1,000 times
}

TEST_F(NcuSourceSummary, StallsSumTheWarpStateSamplesByReason) {
  // stall_long_sb 30 + 10 of 50 samples, stall_barrier 10; the not-issued columns are left out.
  const auto csv = write(
      "stalls.csv",
      "\"Kernel Name\",\"void norm(Args)\",\n"
      "\"Address\",\"Source\",\"Instructions Executed\",\"stall_barrier\",\"stall_long_sb\","
      "\"stall_long_sb (Not Issued)\"\n"
      "\"0x7f0000000010\",\"      LDG.E.128 R4, [R2]\",\"100\",\"0\",\"30\",\"999\"\n"
      "\"0x7f0000000020\",\"      BAR.SYNC.DEFER_BLOCKING 0x0\",\"100\",\"10\",\"10\",\"999\"\n");
  const ToolRun r = run_tool(kTool, csv, "--stalls");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("stalls: long_sb 80%, barrier 20%"), std::string::npos) << r.out;
  const ToolRun none = run_tool(kTool, csv, "");
  EXPECT_EQ(none.out.find("stalls:"), std::string::npos) << none.out;
}

TEST_F(NcuSourceSummary, FilesWithoutTheSectionsOrColumnsAreErrors) {
  const ToolRun raw = run_tool(kTool, write("raw.csv", "\"ID\",\"Kernel Name\"\n\"0\",\"norm\"\n"), "");
  EXPECT_NE(raw.status, 0);
  EXPECT_NE(raw.out.find("no 'Kernel Name' sections"), std::string::npos) << raw.out;
  const ToolRun no_counts = run_tool(kTool, 
      write("b.csv", "\"Kernel Name\",\"norm\",\n\"Address\",\"Source\"\n\"0x1\",\"NOP\"\n"), "");
  EXPECT_NE(no_counts.status, 0);
  EXPECT_NE(no_counts.out.find("no 'Instructions Executed' column"), std::string::npos)
      << no_counts.out;
}

}  // namespace
}  // namespace ltx::ncu_source_summary_test
