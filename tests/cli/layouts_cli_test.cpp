// `ltx inspect` and `ltx generate` on a Diffusers folder written from the tiny official
// checkpoint (tests/support/layout_writers.h), whole and damaged.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "support/cli_runner.h"
#include "support/layout_writers.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

std::string diffusers_folder(const TempDir& dir) {
  const auto official = io::SafetensorsFile::open(test::fixture("e2e/ltx23_tiny.safetensors"));
  return test::write_diffusers_folder(dir, *official);
}

TEST(LayoutsCli, InspectNamesTheDiffusersLayoutAndItsStorage) {
  TempDir dir;
  const std::string folder = diffusers_folder(dir);
  const test::CliResult r = test::run_ltx(dir, {"inspect", folder});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle : {"Diffusers folder", "bits per weight", "transformer (DiT)", "vocoder"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(LayoutsCli, InspectOfAFolderMissingAShardIsOneErrorLine) {
  TempDir dir;
  const std::string folder = diffusers_folder(dir);
  const fs::path shard =
      fs::path(folder) / "transformer" / "diffusion_pytorch_model-00001-of-00002.safetensors";
  fs::remove(shard);
  const test::CliResult r = test::run_ltx(dir, {"inspect", folder});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find(shard.string()), std::string::npos) << r.err;
}

TEST(LayoutsCli, GenerateFromAFolderMissingAComponentFailsBeforeAnyOutput) {
  TempDir dir;
  const std::string folder = diffusers_folder(dir);
  fs::remove_all(fs::path(folder) / "audio_vae");
  const std::string out = dir.file("out.mp4");
  const test::CliResult r =
      test::run_ltx(dir, {"generate", "--prompt", "a cat", "--output-path", out,
                          "--checkpoint-path", folder, "--pipeline", "one-stage"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find((fs::path(folder) / "audio_vae").string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace ltx
