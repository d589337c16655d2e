// `ltx parity diffusion-decoder` through the built binary: on the fixtures in tests/fixtures, and
// on the full golden io file when the shared golden directory is present ($LTX_GOLDEN_DIR,
// default /work/shared/golden/data).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::diffusion_decoder_parity_test {
namespace {

using test::TempDir;

// The report line of `name` (a failure and huge errors when it is missing).
test::ParityLine line_of(const std::string& report, const std::string& name) {
  const auto l = test::parity_line(report, name);
  if (!l) ADD_FAILURE() << "no line for " << name << " in:\n" << report;
  return l.value_or(test::ParityLine{1e9, 1e9, 1e9});
}

using test::parity_names;

std::string golden(const std::string& name) {
  const char* dir = std::getenv("LTX_GOLDEN_DIR");
  const std::string path = std::string(dir ? dir : "/work/shared/golden/data") + "/" + name;
  return std::filesystem::exists(path) ? path : std::string();
}

double rel_l2(const Tensor& x, const Tensor& ref) {
  const auto a = x.to_double_vector(), b = ref.to_double_vector();
  double d = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]), r += b[i] * b[i];
  return std::sqrt(d / r);
}

TEST(DiffusionDecoderParityCli, ComputesTheLegacyCase) {
  TempDir dir;
  const test::CliResult r =
      test::run_ltx(dir, {"parity", "diffusion-decoder", "--weights",
                          test::fixture("diffdec_legacy.weights.safetensors"), "--inputs",
                          test::fixture("diffdec_legacy.test.io.safetensors"), "--out",
                          dir.file("o.safetensors")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("not computed"), std::string::npos) << r.out;
  for (const char* n :
       {"out.pixels", "out.tiled.pixels", "out.combined.pixels", "out.gated.pixels"})
    EXPECT_LE(line_of(r.out, n).rel_l2, 1e-5) << n;
  for (const auto& n : parity_names(r.out, "inter.gated.folded."))
    EXPECT_EQ(line_of(r.out, n).max_abs, 0.0) << n;
  for (const char* n : {"inter.feat_s4", "inter.s4.out", "inter.s5.t_emb", "inter.s5.modulation"})
    EXPECT_LE(line_of(r.out, n).max_rel, 1e-5) << n;
}

TEST(DiffusionDecoderParityCli, ComputesTheShippedCase) {
  TempDir dir;
  const std::string out = dir.file("o.safetensors");
  const test::CliResult r =
      test::run_ltx(dir, {"parity", "diffusion-decoder", "--weights",
                          test::fixture("diffdec_ltx25.weights.safetensors"), "--inputs",
                          test::fixture("diffdec_ltx25.test.io.safetensors"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LE(line_of(r.out, "out.na_unit.k0").max_rel, 1e-6);
  EXPECT_LE(line_of(r.out, "out.na_unit.k1").max_rel, 1e-6);
  for (const auto& n : parity_names(r.out, "inter.rope."))
    EXPECT_LE(line_of(r.out, n).max_abs, 1e-6) << n;
  for (const auto& n : parity_names(r.out, "inter.s"))
    EXPECT_LE(line_of(r.out, n).max_rel, 1e-5) << n;
  // The fixture keeps a few frames of the pixel outputs; compare the written ones there.
  const auto ref = io::SafetensorsFile::open(test::fixture("diffdec_ltx25.test.io.safetensors"));
  const auto got = io::SafetensorsFile::open(out);
  EXPECT_LE(rel_l2(got->tensor("out.pixels").narrow(2, 0, 3), ref->tensor("out.pixels.frames_0_3")),
            1e-5);
  EXPECT_LE(rel_l2(got->tensor("out.tiled.pixels").narrow(2, 8, 3),
                   ref->tensor("out.tiled.pixels.frames_8_11")),
            1e-5);
}

TEST(DiffusionDecoderParityCli, MatchesTheFullGoldenFile) {
  // The legacy fixture is complete but for its noise; the LTX-2.5 one is cut to a few frames.
  for (const char* c : {"ltx25"}) {
    const std::string weights = golden(str("diffdec_", c, ".weights.safetensors"));
    const std::string io = golden(str("diffdec_", c, ".io.safetensors"));
    if (weights.empty() || io.empty()) GTEST_SKIP() << "no shared golden data";
    TempDir dir;
    const test::CliResult r =
        test::run_ltx(dir, {"parity", "diffusion-decoder", "--weights", weights, "--inputs", io,
                            "--out", dir.file("o.safetensors")});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.find("not computed"), std::string::npos) << r.out;
    for (const auto& n : parity_names(r.out, "out.")) {
      EXPECT_LE(line_of(r.out, n).rel_l2, 1e-5) << c << " " << n;
      EXPECT_LE(line_of(r.out, n).max_rel, 3e-5) << c << " " << n;
    }
  }
}

TEST(DiffusionDecoderParityCli, FailsCleanlyOnTheWrongWeights) {
  TempDir dir;
  const std::string out = dir.file("o.safetensors");
  const test::CliResult r =
      test::run_ltx(dir, {"parity", "diffusion-decoder", "--weights",
                          test::fixture("vae_ltx23.weights.safetensors"), "--inputs",
                          test::fixture("diffdec_legacy.test.io.safetensors"), "--out", out});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("diffusion VAE"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace ltx::diffusion_decoder_parity_test
