// `ltx parity video-vae` and `ltx parity upsampler` on golden fixtures, through the built binary.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::TempDir;

using Result = test::CliResult;

// The rel_l2 column of the line for `name` ("name max_abs rel_l2 max_rel").
double rel_l2_of(const std::string& report, const std::string& name) {
  std::istringstream lines(report);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string n;
    double max_abs = -1, rel_l2 = -1;
    if ((f >> n >> max_abs >> rel_l2) && n == name) return rel_l2;
  }
  ADD_FAILURE() << "no line for " << name << " in:\n" << report;
  return 1e9;
}

TEST(ParityCli, VideoVaeComputesEveryOutputOfTheTimestepConditionedFixture) {
  TempDir dir;
  const std::string out = dir.file("out.safetensors");
  const Result r = test::run_ltx(dir, {"parity", "video-vae", "--weights",
                             test::fixture("vae_tsc.weights.safetensors"), "--inputs",
                             test::fixture("vae_tsc.io.safetensors"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("not computed"), std::string::npos) << r.out;
  for (const char* name : {"out.decode.pixels", "out.decode_default_t.pixels",
                           "out.decode_causal.pixels", "out.tiled_decode.pixels"})
    EXPECT_LE(rel_l2_of(r.out, name), 2e-5) << name;
  EXPECT_EQ(rel_l2_of(r.out, "out.tiled_decode.chunk_frames"), 0.0);
  EXPECT_LE(rel_l2_of(r.out, "inter.decode.up_blocks.2"), 1e-5);
  const auto written = io::SafetensorsFile::open(out);
  EXPECT_TRUE(written->contains("out.decode.pixels"));
  EXPECT_EQ(written->info("out.tiled_decode.chunk_frames").dtype, DType::I64);
}

TEST(ParityCli, UpsamplerComputesTheRationalCase) {
  TempDir dir;
  const Result r = test::run_ltx(dir, {"parity", "upsampler", "--weights",
                             test::fixture("upsampler_x1_5.weights.safetensors"), "--weights",
                             test::fixture("vae_ltx23.weights.safetensors"), "--inputs",
                             test::fixture("upsampler_x1_5.io.safetensors"), "--out",
                             dir.file("out.safetensors")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("not computed"), std::string::npos) << r.out;
  EXPECT_LE(rel_l2_of(r.out, "out.latent"), 1e-5);
  EXPECT_LE(rel_l2_of(r.out, "inter.after_upsampler"), 1e-5);
}

TEST(ParityCli, VideoVaeFailsCleanlyOnTheWrongWeights) {
  TempDir dir;
  const std::string out = dir.file("out.safetensors");
  const Result r = test::run_ltx(dir, {"parity", "video-vae", "--weights",
                             test::fixture("upsampler_x2.weights.safetensors"), "--inputs",
                             test::fixture("vae_tsc.io.safetensors"), "--out", out});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("vae"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(out).good());  // no partial output
}

}  // namespace
}  // namespace ltx
