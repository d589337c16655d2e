// `ltx parity audio` as a user runs it (DEVELOPERS.md): the built binary on a golden fixture.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using Result = test::CliResult;

TEST(AudioParityCli, ComputesEveryOutputOfTheBweFixture) {
  test::TempDir dir;
  const std::string out = dir.file("out.safetensors");
  const Result r = test::run_ltx(dir, {"parity", "audio", "--weights",
                                 test::fixture("audio_ltx23.weights.safetensors"), "--inputs",
                                 test::fixture("audio_ltx23.io.safetensors"), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle : {"out.vocoder.waveform", "out.pipeline.waveform", "out.encoder.latent",
                             "out.mel_wave44k.mel", "out.pipeline_encode_conform.latent",
                             "inter.bwe.skip", "wrote 60 outputs"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  EXPECT_EQ(r.out.find("not computed"), std::string::npos) << r.out;
  const io::SafetensorsFile written(out);
  EXPECT_EQ(written.info("out.pipeline.sampling_rate").dtype, DType::I64);
  EXPECT_EQ(written.info("out.vocoder_f64.waveform").dtype, DType::F64);
}

TEST(AudioParityCli, FailsWithOneLineAndNoOutputForTheWrongWeights) {
  test::TempDir dir;
  const std::string out = dir.file("out.safetensors");
  const Result r = test::run_ltx(dir, {"parity", "audio", "--weights",
                                 test::fixture("upsampler_x2.weights.safetensors"), "--inputs",
                                 test::fixture("audio_ltx2.io.safetensors"), "--out", out});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("audio VAE decoder"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::ifstream(out).good());
}

}  // namespace
}  // namespace ltx
