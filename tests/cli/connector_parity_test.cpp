// `ltx parity connector` through the built binary on the golden text-connector fixtures.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "parity/parity.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::TempDir;

using Result = test::CliResult;

TEST(ConnectorParityCli, SplitPackWritesEveryOutputAndPrintsItsErrors) {
  TempDir dir;
  const std::string io_path = test::fixture("ltx25.textproc.io.safetensors");
  const std::string out_path = dir.file("out.safetensors");
  const Result r = test::run_ltx(dir, {"parity", "connector", "--weights", test::fixture("ltx25.weights.safetensors"),
                                 "--weights", test::fixture("ltx25.text_proj.weights.safetensors"),
                                 "--inputs", io_path, "--out", out_path});
  ASSERT_EQ(r.code, 0) << r.err;
  const io::SafetensorsFile out(out_path), ref(io_path);
  for (const char* name : {"out.features.video", "out.features.audio", "out.video_encoding",
                           "out.audio_encoding", "out.encoding_mask"}) {
    ASSERT_TRUE(out.contains(name)) << name;
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
    EXPECT_LE(parity::compare(out.tensor(name), ref.tensor(name)).rel_l2, 1e-5) << name;
  }
  EXPECT_FALSE(out.contains("out.f64.video_encoding"));
  for (const char* s : {"feature extractor V2", "rel_l2", "not computed (2)"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  EXPECT_NE(r.err.find("f64"), std::string::npos) << r.err;
}

TEST(ConnectorParityCli, FailsWithoutOutputWhenItCannotRun) {
  TempDir dir;
  const std::string out_path = dir.file("out.safetensors");
  const std::string io_path = test::fixture("ltx25.textproc.io.safetensors");
  // The 2.5 transformer file alone has neither connectors nor projection.
  Result r = test::run_ltx(dir, {"parity", "connector", "--weights", test::fixture("ltx25.weights.safetensors"),
                           "--inputs", io_path, "--out", out_path});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out_path));
  // The io file has no hidden states.
  r = test::run_ltx(dir, {"parity", "connector", "--weights", test::fixture("ltx23.weights.safetensors"),
                    "--inputs", test::fixture("ltx23.io.safetensors"), "--out", out_path});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("hidden_states"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out_path));
}

}  // namespace
}  // namespace ltx
