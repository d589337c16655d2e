// Runs the built `ltx` binary (LTX_BINARY) on the fixtures and on broken files.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::inspect_test {
namespace {

using test::TempDir;

using CliRun = test::CliResult;

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(InspectCli, PrintsTheBundledCheckpointAsText) {
  TempDir dir;
  const std::string path = test::fixture("tiny_ltx2_19b.safetensors");
  const CliRun r = test::run_ltx(dir, {"inspect", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* needle :
       {"tiny_ltx2_19b.safetensors", "LTX-2 (19B)", "single-file checkpoint", "transformer (DiT)",
        "video text connector", "audio text connector", "text projection", "video VAE encoder",
        "video VAE decoder", "audio VAE decoder", "vocoder", "heads=2x32", "num_layers=2",
        "kind=HiFi-GAN", "1,523,336", "bf16"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(InspectCli, JsonIsOneArrayWithAnObjectPerFile) {
  TempDir dir;
  const std::string a = test::fixture("ltx25.weights.bf16.safetensors");
  const std::string b = test::fixture("text_gemma4.te.safetensors");
  const CliRun r = test::run_ltx(dir, {"inspect", a, b, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // the whole stdout is one document
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["path"], a);
  EXPECT_EQ(j[0]["version"], "2.5");
  EXPECT_EQ(j[0]["version_name"], "LTX-2.5 (22B)");
  EXPECT_EQ(j[0]["model_version"], "2.5.0");
  EXPECT_EQ(j[0]["layout"], "transformer");
  EXPECT_EQ(j[0]["components"][0]["id"], "transformer");
  EXPECT_EQ(j[0]["components"][0]["config"]["ff_bias"], false);
  EXPECT_EQ(j[0]["components"][0]["config"]["use_keyframes_abs_pos_embedding"], true);
  int64_t numel = 0;
  const io::SafetensorsFile file(a);
  for (const auto& ti : file.infos()) numel += ti.numel();
  EXPECT_EQ(j[0]["params"], numel);
  EXPECT_EQ(j[1]["family"], "Gemma");
  EXPECT_EQ(j[1]["layout"], "text encoder");
  int64_t sum = 0;
  for (const auto& c : j[1]["components"]) {
    for (const char* field :
         {"id", "name", "tensors", "params", "bytes", "dtypes", "config", "defaulted", "notes"})
      EXPECT_TRUE(c.contains(field)) << field;
    sum += c["params"].get<int64_t>();
  }
  EXPECT_EQ(sum, j[1]["params"].get<int64_t>());
}

TEST(InspectCli, CorruptFileGivesOneErrorLineAndNonZeroExit) {
  TempDir dir;
  const std::string bad = dir.file("corrupt.safetensors");
  std::string bytes = test::read_bytes(test::fixture("duration_ltx25.weights.safetensors"));
  bytes.resize(bytes.size() - 10);  // truncated download
  test::write_bytes(bad, bytes);
  for (bool json : {false, true}) {
    std::vector<std::string> args = {"inspect", bad};
    if (json) args.push_back("--json");
    const CliRun r = test::run_ltx(dir, args);
    EXPECT_NE(r.code, 0);
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(bad), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("outside the data section"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("duration"), std::string::npos) << "partial output: " << r.out;
  }
}

TEST(InspectCli, ReportsGoodFilesAndFailsForTheBadOne) {
  TempDir dir;
  const std::string bad = dir.file("seven.safetensors");
  test::write_bytes(bad, "1234567");
  const std::string good = test::fixture("upsampler_x2.weights.safetensors");
  const CliRun r = test::run_ltx(dir, {"inspect", good, bad, "--json"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("seven.safetensors"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["layout"], "latent upsampler");

  const CliRun t = test::run_ltx(dir, {"inspect", bad, good});
  EXPECT_EQ(t.code, 1);
  EXPECT_NE(t.out.find("latent upsampler"), std::string::npos);
  EXPECT_EQ(t.out.find("seven"), std::string::npos);
}

TEST(InspectCli, MissingFileAndMissingArgumentFail) {
  TempDir dir;
  const CliRun r = test::run_ltx(dir, {"inspect", dir.file("nope.safetensors")});
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(count_lines(r.err), 1);
  EXPECT_NE(r.err.find("nope.safetensors"), std::string::npos);
  EXPECT_EQ(r.out, "");
  const CliRun none = test::run_ltx(dir, {"inspect"});
  EXPECT_NE(none.code, 0);
}

TEST(InspectCli, InspectsALoraWrittenByTheWriter) {
  TempDir dir;
  const std::string lora = dir.file("style.lora.safetensors");
  io::write_safetensors(lora,
                        {{"diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight",
                          Tensor::zeros({8, 64}, DType::BF16)},
                         {"diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight",
                          Tensor::zeros({64, 8}, DType::BF16)}},
                        {{"reference_downscale_factor", "2"}});
  const CliRun r = test::run_ltx(dir, {"inspect", lora});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle :
       {"LoRA", "targets=1", "rank=8", "metadata.reference_downscale_factor=2"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

// Which quantized form a file's weights are in, and the --quantization modes that load it.
TEST(InspectCli, SaysWhichQuantizationAFileIsAndWhichModesLoadIt) {
  TempDir dir;
  const std::string fp8 = dir.file("fp8.safetensors");
  const std::string p = "model.diffusion_model.transformer_blocks.0.attn1.to_q.";
  io::write_safetensors(fp8, {{p + "weight", Tensor::zeros({8, 8}, DType::F8E4M3FN)},
                              {p + "weight_scale", Tensor::full({}, 0.5)},
                              {p + "input_scale", Tensor::full({}, 0.25)},
                              {p + "bias", Tensor::zeros({8}, DType::BF16)}});
  const CliRun r = test::run_ltx(dir, {"inspect", fp8});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle :
       {"quantization: FP8 per-tensor scaled: 1 Linear weights F8_E4M3 with a per-tensor "
        "weight_scale (1 with input_scale)",
        "--quantization modes that load it: fp8-cast, fp8-scaled-mm, fp8 (this build: none, "
        "fp8-cast, fp8-scaled-mm, fp8, nvfp4-cast, nvfp4-prequant, fp8-blockwise)"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;

  // A blockwise FP8 file (the reference's key names: 2-D weight_scale per 128 x 128 tile).
  const std::string block = dir.file("fp8_block.safetensors");
  io::write_safetensors(block, {{p + "weight", Tensor::zeros({256, 128}, DType::F8E4M3FN)},
                                {p + "weight_scale", Tensor::full({2, 1}, 0.5)},
                                {p + "bias", Tensor::zeros({256}, DType::F32)}});
  const CliRun b = test::run_ltx(dir, {"inspect", block});
  ASSERT_EQ(b.code, 0) << b.err;
  for (const char* needle : {"quantization: blockwise FP8: 1 Linear weights F8_E4M3 with a "
                             "blockwise weight_scale",
                             "--quantization modes that load it: fp8-blockwise (this build"})
    EXPECT_NE(b.out.find(needle), std::string::npos) << needle << "\n" << b.out;

  const CliRun dense = test::run_ltx(dir, {"inspect", test::fixture("ltx23.weights.bf16.safetensors"),
                                           fp8, "--json"});
  ASSERT_EQ(dense.code, 0) << dense.err;
  const nlohmann::json j = nlohmann::json::parse(dense.out);
  EXPECT_EQ(j[0]["quantization"]["format"], "dense (no FP8 / NVFP4 weights)");
  EXPECT_EQ(j[0]["quantization"]["modes"],
            nlohmann::json({"none", "fp8-cast", "fp8", "nvfp4-cast", "fp8-blockwise"}));
  EXPECT_EQ(j[1]["quantization"]["format"], "FP8 per-tensor scaled");
  EXPECT_EQ(j[1]["quantization"]["fp8_per_tensor"], 1);
  EXPECT_EQ(j[1]["quantization"]["fp8_input_scales"], 1);
}

TEST(InspectCli, DescribesACommunityGgufFile) {
  TempDir dir;
  const std::string path = test::fixture("gguf/ltx23_tiny.gguf");
  const CliRun text = test::run_ltx(dir, {"inspect", path});
  ASSERT_EQ(text.code, 0) << text.err;
  for (const char* needle : {"GGUF v3", "arch        ltxv", "LTX-2.3 (22B)", "transformer (DiT)",
                             "storage     F32", "178 tensors", "Q4_0", "36 tensors", "Q8_0",
                             "16 tensors",
                             "bits/weight", "--quantization modes do not apply"})
    EXPECT_NE(text.out.find(needle), std::string::npos) << needle << "\n" << text.out;
  const CliRun json = test::run_ltx(dir, {"inspect", path, "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j[0]["format"], "GGUF");
  EXPECT_EQ(j[0]["version"], "2.3");
  EXPECT_EQ(j[0]["gguf"]["architecture"], "ltxv");
  EXPECT_EQ(j[0]["gguf"]["types"]["Q4_0"]["tensors"], 36);
  EXPECT_GT(j[0]["gguf"]["bits_per_weight"].get<double>(), 4.5);
  EXPECT_EQ(j[0]["quantization"]["format"], "GGUF");

  // A truncated download: one error line naming the file, exit 1, nothing on stdout.
  const std::string bad = dir.file("cut.gguf");
  std::string bytes = test::read_bytes(path);
  bytes.resize(bytes.size() / 2);
  test::write_bytes(bad, bytes);
  const CliRun r = test::run_ltx(dir, {"inspect", bad});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("invalid GGUF file '" + bad + "'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace ltx::inspect_test
