// tools/bench/ncu_kernel_summary.py (bench/README.md, "Kernel by kernel"): on a small export in
// Nsight Compute's raw CSV form (a units row, thousands separators in the numbers) it sums the
// kernels' times per name and per name + launch shape, heaviest first; a file without the
// columns it needs is an error.
#include <gtest/gtest.h>

#include <string>

#include "bench/python_tool_test.h"

namespace ltx::ncu_summary_test {
namespace {

using test::ToolRun;

using NcuKernelSummary = test::PythonToolTest;
constexpr const char* kTool = "ncu_kernel_summary.py";

TEST_F(NcuKernelSummary, SumsKernelTimesPerNameAndPerLaunchShape) {
  const auto csv = write("step.csv",
                             "\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\",\"gpu__time_duration.sum\"\n"
                             "\"\",\"\",\"\",\"\",\"ns\"\n"
                             "\"0\",\"norm\",\"(256, 1, 1)\",\"(792, 1, 1)\",\"1,500\"\n"
                             "\"1\",\"gemm\",\"(384, 1, 1)\",\"(2, 66, 1)\",\"2,000,000\"\n"
                             "\"2\",\"norm\",\"(256, 1, 1)\",\"(126, 1, 1)\",\"500\"\n");
  const ToolRun by_name = run_tool(kTool, csv, "--by name");
  ASSERT_EQ(by_name.status, 0) << by_name.out;
  EXPECT_NE(by_name.out.find("3 kernels, 2.00 ms in all"), std::string::npos) << by_name.out;
  // Heaviest first; the two norm launches in one row of 2 calls, 1.0 us each.
  const size_t gemm = by_name.out.find("gemm"), norm = by_name.out.find("norm");
  ASSERT_NE(gemm, std::string::npos);
  ASSERT_NE(norm, std::string::npos);
  EXPECT_LT(gemm, norm);
  EXPECT_NE(by_name.out.find("     2       1.0"), std::string::npos) << by_name.out;

  // Per launch shape the two norm launches stay apart.
  const ToolRun by_shape = run_tool(kTool, csv, "--by shape");
  ASSERT_EQ(by_shape.status, 0) << by_shape.out;
  EXPECT_NE(by_shape.out.find("norm  grid (792, 1, 1) block (256, 1, 1)"), std::string::npos)
      << by_shape.out;
  EXPECT_NE(by_shape.out.find("norm  grid (126, 1, 1) block (256, 1, 1)"), std::string::npos)
      << by_shape.out;
}

TEST_F(NcuKernelSummary, FilesWithoutTheColumnsAreErrors) {
  const ToolRun no_kernels = run_tool(kTool, write("a.csv", "\"ID\",\"Duration\"\n\"0\",\"1\"\n"), "");
  EXPECT_NE(no_kernels.status, 0);
  EXPECT_NE(no_kernels.out.find("no 'Kernel Name' column"), std::string::npos) << no_kernels.out;
  const ToolRun no_metric =
      run_tool(kTool, write("b.csv", "\"ID\",\"Kernel Name\",\"Block Size\",\"Grid Size\"\n"), "");
  EXPECT_NE(no_metric.status, 0);
  EXPECT_NE(no_metric.out.find("gpu__time_duration.sum"), std::string::npos) << no_metric.out;
}

}  // namespace
}  // namespace ltx::ncu_summary_test
