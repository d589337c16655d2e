// `ltx quantize` and `ltx convert` through the built binary: the summary and progress, the file
// `ltx inspect` reads back, and bad input (one error line, exit 1, no output file).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/io_test_util.h"
#include "support/cli_runner.h"
#include "support/tiny_transformer_checkpoint.h"

namespace ltx::quantize_cli_test {
namespace {

using test::TempDir;

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(QuantizeCli, WritesAGgufThatInspectReads) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors"), out = dir.file("ckpt-Q4_K_M.gguf");
  test::write_tiny_transformer_checkpoint(in);
  const test::CliResult r = test::run_ltx(dir, {"quantize", in, "--type", "Q4_K_M", "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle : {"wrote", "GGUF, Q4_K_M", "Q4_K: 2 tensors", "Q6_K: 2 tensors",
                             "bits per weight", "left out 1 tensors"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  EXPECT_NE(r.err.find("quantize: 100 %"), std::string::npos) << r.err;

  const test::CliResult i = test::run_ltx(dir, {"inspect", out, "--json"});
  ASSERT_EQ(i.code, 0) << i.err;
  const nlohmann::json j = nlohmann::json::parse(i.out);
  EXPECT_EQ(j[0]["gguf"]["architecture"], "ltxv");
  EXPECT_EQ(j[0]["gguf"]["key_prefix_added"], "model.diffusion_model.");
  EXPECT_EQ(j[0]["gguf"]["types"]["Q4_K"]["tensors"], 2);
  EXPECT_EQ(j[0]["gguf"]["types"]["Q6_K"]["tensors"], 2);
  EXPECT_EQ(j[0]["model_version"], "2.3.0");
  EXPECT_EQ(j[0]["components"][0]["id"], "transformer");
}

TEST(QuantizeCli, JsonSummaryAndQuiet) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors"), out = dir.file("q8.gguf");
  test::write_tiny_transformer_checkpoint(in);
  const test::CliResult r =
      test::run_ltx(dir, {"--quiet", "quantize", in, "--type", "q8_0", "--out", out, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "GGUF");
  EXPECT_EQ(j["target"], "Q8_0");
  EXPECT_EQ(j["file_bytes"], std::filesystem::file_size(out));
  EXPECT_EQ(j["types"]["Q8_0"]["bits_per_weight"], 8.5);
  EXPECT_EQ(j["left_out"], 1);
}

TEST(QuantizeCli, BadInputIsOneErrorLineAndNoFile) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors"), out = dir.file("o.gguf");
  test::write_tiny_transformer_checkpoint(in);
  test::write_bytes(dir.file("cut.safetensors"), "not a checkpoint");
  const struct { std::vector<std::string> args; const char* needle; } cases[] = {
      {{"quantize", in, "--type", "IQ4_XS", "--out", out}, "unknown --type 'IQ4_XS'"},
      {{"quantize", dir.file("cut.safetensors"), "--type", "Q8_0", "--out", out}, "cut.safetensors"},
      {{"convert", in, "--to", "onnx", "--out", out}, "unknown --to 'onnx'"},
  };
  for (const auto& c : cases) {
    const test::CliResult r = test::run_ltx(dir, c.args);
    EXPECT_EQ(r.code, 1) << c.needle;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.needle;
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp")) << c.needle;
  }
}

TEST(ConvertCli, GgufBackToSafetensorsNeedsAnExactDtypeOrAllowLossy) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors"), q = dir.file("q.gguf"),
                    out = dir.file("back.safetensors");
  test::write_tiny_transformer_checkpoint(in);
  ASSERT_EQ(test::run_ltx(dir, {"quantize", in, "--type", "Q6_K", "--out", q}).code, 0);
  const test::CliResult refused = test::run_ltx(dir, {"convert", q, "--to", "safetensors", "--out", out});
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("--dtype f32"), std::string::npos) << refused.err;
  const test::CliResult ok =
      test::run_ltx(dir, {"convert", q, "--to", "safetensors", "--out", out, "--allow-lossy"});
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("dequantised to bf16"), std::string::npos) << ok.out;
  EXPECT_TRUE(io::SafetensorsFile(out).contains(
      "model.diffusion_model.transformer_blocks.0.attn1.to_q.weight"));
}

}  // namespace
}  // namespace ltx::quantize_cli_test
