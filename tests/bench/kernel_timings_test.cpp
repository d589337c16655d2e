// `ltx bench kernels`' library side that runs without a GPU: harness selection, the table line,
// the JSON report.
#include "bench/kernel_timings.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::expect_error_containing;

TEST(KernelTimings, FiltersSelectHarnessesInRunOrder) {
  EXPECT_EQ(bench::select_kernel_harnesses({}), bench::kernel_harness_names());
  EXPECT_EQ(bench::select_kernel_harnesses({"vae-glue", "fused-glue", "vae-glue"}),
            (std::vector<std::string>{"fused-glue", "vae-glue"}));
  expect_error_containing([] { (void)bench::select_kernel_harnesses({"fused-glue", "glue"}); },
                          {"--filter: unknown kernel harness 'glue'; use one of step-kernels, fused-glue"});
}

TEST(KernelTimings, LineKeepsTheTableFormatAndJsonTheValues) {
  const bench::KernelTiming gbs{"step-kernels", "bf16", "add                   ", 0.0421, 3586.4, "GB/s"};
  const bench::KernelTiming tflops{"step-kernels", "f32", "attention video self     mma   ", 2.6341, 235.04, "TFLOP/s"};
  const bench::KernelTiming plain{"fused-glue", "bf16", "rms_norm (no weight)    ", 0.0346, 0, ""};
  EXPECT_EQ(gbs.line(), "[timing bf16] add                    0.042 ms  3586 GB/s");
  EXPECT_EQ(tflops.line(), "[timing f32] attention video self     mma    2.634 ms  235.0 TFLOP/s");
  EXPECT_EQ(plain.line(), "[timing bf16] rms_norm (no weight)     0.035 ms");
  const nlohmann::json j = bench::kernel_timings_json({gbs, plain}, "cuda:0");
  EXPECT_EQ(j["tool"], "ltx bench kernels");
  EXPECT_EQ(j["device"], "cuda:0");
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["harness"], "step-kernels");
  EXPECT_EQ(j["rows"][0]["name"], "add");
  EXPECT_DOUBLE_EQ(j["rows"][0]["ms"].get<double>(), 0.0421);
  EXPECT_EQ(j["rows"][0]["unit"], "GB/s");
  EXPECT_EQ(j["rows"][1]["name"], "rms_norm (no weight)");
  EXPECT_FALSE(j["rows"][1].contains("unit"));
}

TEST(KernelTimings, RunNeedsACudaDevice) {
  expect_error_containing(
      [] { (void)bench::run_kernel_timings({"fused-glue"}, Device::cpu(), [](const bench::KernelTiming&) {}); },
      {"--device cpu: `ltx bench kernels` times CUDA kernels; use --device cuda[:N]"});
}

}  // namespace
}  // namespace ltx
