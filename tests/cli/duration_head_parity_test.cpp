// `ltx parity duration-head` through the built binary on the golden duration_ltx25 fixture.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "io/safetensors.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::duration_head_parity_test {
namespace {

using test::parity_names;
using test::TempDir;

// The report line of `name` (a failure and huge errors when it is missing).
test::ParityLine line_of(const std::string& report, const std::string& name) {
  const auto l = test::parity_line(report, name);
  if (!l) ADD_FAILURE() << "no line for " << name << " in:\n" << report;
  return l.value_or(test::ParityLine{1e9, 1e9, 1e9});
}

TEST(DurationHeadParityCli, ComputesEveryOutputWithExactFrames) {
  TempDir dir;
  const test::CliResult r = test::run_ltx(
      dir, {"parity", "duration-head", "--weights",
            test::fixture("duration_ltx25.weights.safetensors"), "--inputs",
            test::fixture("duration_ltx25.io.safetensors"), "--out", dir.file("o.safetensors")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("not computed"), std::string::npos) << r.out;
  EXPECT_LE(line_of(r.out, "out.seconds.f32").max_rel, 1e-5);
  EXPECT_LE(line_of(r.out, "out.log_seconds.f32").max_abs, 1e-5);
  const auto frames = parity_names(r.out, "out.frames.");
  EXPECT_EQ(frames.size(), 12u);
  for (const auto& n : frames)
    if (n.ends_with(".f32")) {
      EXPECT_EQ(line_of(r.out, n).max_abs, 0.0) << n;
    }
  for (const char* n : {"table.frames", "table.min_frames", "table.max_frames", "table.raw_frames"})
    EXPECT_EQ(line_of(r.out, n).max_abs, 0.0) << n;
  for (const auto& n : parity_names(r.out, "inter.p0."))
    EXPECT_LE(line_of(r.out, n).rel_l2, 1e-5) << n;
  const auto written = io::SafetensorsFile::open(dir.file("o.safetensors"));
  EXPECT_EQ(written->info("out.frames.default_24fps.f32").dtype, DType::I64);
}

TEST(DurationHeadParityCli, FailsCleanlyWithoutADurationHead) {
  TempDir dir;
  const std::string out = dir.file("o.safetensors");
  const test::CliResult d = test::run_ltx(
      dir, {"parity", "duration-head", "--weights", test::fixture("vae_ltx23.weights.safetensors"),
            "--inputs", test::fixture("duration_ltx25.io.safetensors"), "--out", out});
  EXPECT_NE(d.code, 0);
  EXPECT_NE(d.err.find("no duration_head"), std::string::npos) << d.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace ltx::duration_head_parity_test
