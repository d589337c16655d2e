// `ltx bench`: the tiny CPU preset end to end, JSON output, the FLOP-only mode, flag errors, and
// `ltx bench kernels`' argument checks (which come before any GPU work).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "media/support.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::TempDir;

const std::vector<std::string> kTiny = {"bench", "--preset", "tiny", "--device", "cpu",
                                        "--warmup", "0", "--iters", "2"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(BenchCli, TinyPresetOnTheCpuPrintsTheTable) {
  TempDir dir;
  const auto r = test::run_ltx(dir, with({"--quiet"}, kTiny));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* needle : {"preset tiny", "cpu CPU (", "f32", "0 warm-up + 2 timed", "case", "TFLOP",
                             "floor ms", "ours ms", "peak GiB", "official ms", "ours/off", "% floor",
                             "transformer 64x64x9 +audio", "transformer 128x64x9 +audio",
                             "vae decode 64x64x9", "diffusion decode 64x64x9 (", "chunked_eager)",
                             "790 TFLOP/s"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(BenchCli, JsonReportOnStdoutAndInAFile) {
  TempDir dir;
  const std::string out = dir.file("report/bench.json");
  const auto r = test::run_ltx(dir, with(kTiny, {"transformer", "--size", "64x64", "--json", "--out", out}));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // the whole stdout is the document
  EXPECT_EQ(j["tool"], "ltx bench");
  EXPECT_EQ(j["preset"], "tiny");
  EXPECT_EQ(j["dtype"], "f32");
  ASSERT_EQ(j["cases"].size(), 1u);
  const auto& c = j["cases"][0];
  EXPECT_EQ(c["kind"], "transformer");
  EXPECT_EQ(c["tokens"]["video"], 8);
  EXPECT_EQ(c["ours"]["all_ms"].size(), 2u);
  EXPECT_GT(c["ours"]["median_ms"].get<double>(), 0);
  EXPECT_GT(c["flops"]["total"].get<int64_t>(), 0);
  EXPECT_TRUE(c["official"].empty());
  EXPECT_EQ(nlohmann::json::parse(test::read_bytes(out))["cases"][0]["flops"], c["flops"]);
}

// The transformer step with its Linears under fp8-cast: the report says which mode ran.
TEST(BenchCli, Fp8CastTransformerStepRunsAndIsNamedInTheReport) {
  TempDir dir;
  const auto r = test::run_ltx(
      dir, with(kTiny, {"transformer", "--size", "64x64", "--quantization", "fp8-cast", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["quantization"], "fp8-cast");
  ASSERT_EQ(j["cases"].size(), 1u);
  EXPECT_GT(j["cases"][0]["ours"]["median_ms"].get<double>(), 0);
  EXPECT_NE(r.err.find("(--quantization fp8-cast)"), std::string::npos) << r.err;
}

TEST(BenchCli, Nvfp4CastTransformerStepRunsAndIsNamedInTheReport) {
  TempDir dir;
  const auto r = test::run_ltx(
      dir, with(kTiny, {"transformer", "--size", "64x64", "--quantization", "nvfp4-cast", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["quantization"], "nvfp4-cast");
  ASSERT_EQ(j["cases"].size(), 1u);
  EXPECT_GT(j["cases"][0]["ours"]["median_ms"].get<double>(), 0);
}

// --quantization fp8: the step runs with FP8 GEMMs, and the report gives its rel L2 against one
// unquantized step; fp8-scaled-mm needs a pre-quantised checkpoint, which random weights are not.
TEST(BenchCli, Fp8TransformerStepReportsItsRelL2AgainstTheUnquantizedStep) {
  TempDir dir;
  const auto r = test::run_ltx(
      dir, with(kTiny, {"transformer", "--size", "64x64", "--quantization", "fp8", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["quantization"], "fp8");
  ASSERT_EQ(j["cases"].size(), 1u);
  const nlohmann::json& q = j["cases"][0]["quantization_rel_l2"];
  ASSERT_TRUE(q.is_object()) << r.out;
  // Two e4m3 operands per product: a few percent (tests/models/transformer_fp8_scaled_test.cpp);
  // zero would mean nothing was quantized, O(1) a broken mode.
  EXPECT_GT(q["video"].get<double>(), 0.0);
  EXPECT_LT(q["video"].get<double>(), 0.1);
  EXPECT_NE(r.err.find("rel L2 vs unquantized"), std::string::npos) << r.err;

  const auto s = test::run_ltx(
      dir, with(kTiny, {"transformer", "--size", "64x64", "--quantization", "fp8-scaled-mm"}));
  EXPECT_EQ(s.code, 1);
  EXPECT_NE(s.err.find("which random weights are not"), std::string::npos) << s.err;
}

// --quantization fp8-blockwise: random weights are quantised per 128 x 128 tile at load, the step
// runs with blockwise FP8 linears, and the report gives the rel L2 against the unquantized step.
TEST(BenchCli, Fp8BlockwiseTransformerStepReportsItsRelL2AgainstTheUnquantizedStep) {
  TempDir dir;
  const auto r = test::run_ltx(
      dir, with(kTiny, {"transformer", "--size", "64x64", "--quantization", "fp8-blockwise", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["quantization"], "fp8-blockwise");
  const nlohmann::json& q = j["cases"][0]["quantization_rel_l2"];
  ASSERT_TRUE(q.is_object()) << r.out;
  EXPECT_GT(q["video"].get<double>(), 0.0);
  EXPECT_LT(q["video"].get<double>(), 0.1);
}

// --weights-format q8_0: the transformer's linears that `ltx quantize --type Q8_0` quantises run
// as GGML blocks (the tiny preset's 32-wide blocks fit its feed-forward weights), the report names
// the format and the weight bytes, and the rel L2 is against the bf16 values the blocks came from.
TEST(BenchCli, GgmlWeightsFormatRunsTheStepOnBlocksAndReportsIt) {
  TempDir dir;
  const auto r = test::run_ltx(
      dir, with(kTiny, {"transformer", "--size", "64x64", "--weights-format", "q8_0", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["weights_format"], "Q8_0");
  EXPECT_EQ(j["quantization"], "none");
  ASSERT_EQ(j["cases"].size(), 1u);
  const nlohmann::json& ours = j["cases"][0]["ours"];
  EXPECT_GT(ours["ggml_weights"].get<int64_t>(), 0);
  EXPECT_GT(ours["weights_bytes"].get<int64_t>(), 0);
  const nlohmann::json& q = j["cases"][0]["quantization_rel_l2"];
  ASSERT_TRUE(q.is_object()) << r.out;
  // 8-bit blocks: well under a percent; zero would mean no weight went through the blocks.
  EXPECT_GT(q["video"].get<double>(), 0.0);
  EXPECT_LT(q["video"].get<double>(), 0.02);
  EXPECT_NE(q["against"].get<std::string>().find("bf16 values"), std::string::npos);
  EXPECT_NE(r.err.find("as Q8_0 GGML blocks"), std::string::npos) << r.err;

  const auto t = test::run_ltx(dir, with(kTiny, {"transformer", "--size", "64x64", "--weights-format", "Q8_0"}));
  ASSERT_EQ(t.code, 0) << t.err;
  for (const char* needle : {"(transformer --weights-format Q8_0)", "GiB, ", "linear weights as Q8_0 GGML blocks",
                             "--weights-format Q8_0 vs one step on the bf16 values"})
    EXPECT_NE(t.out.find(needle), std::string::npos) << needle << "\n" << t.out;
}

TEST(BenchCli, FlopsModeShowsTheIssueNumbersWithoutRunning) {
  TempDir dir;
  const auto r = test::run_ltx(dir, {"bench", "flops"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle : {"transformer 768x512x121 +audio", "202.0", "262.2",
                             "transformer 1536x1024x121 +audio", "1149.1", "1545.8",
                             "vae decode 1536x1024x121"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(BenchCli, FlopsModeShowsTheLtx25DiffusionDecode) {
  TempDir dir;
  const auto r = test::run_ltx(dir, {"bench", "flops", "--preset", "ltx25-22b", "--decode-free-gib", "139"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle : {"preset ltx25-22b", "transformer 1536x1024x121 +audio", "vae decode 1536x1024x121",
                             "diffusion decode 1536x1024x121 (1 tile, chunked_eager)", "439.7", "583.1"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  // `diffdec` alone (the tiny decoder on the CPU), as JSON, with the per-stage terms.
  const auto j = test::run_ltx(dir, {"bench", "diffdec", "--preset", "tiny", "--decode-free-gib", "8", "--json",
                                     "--iters", "1", "--warmup", "0"});
  ASSERT_EQ(j.code, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc["cases"].size(), 1u);
  EXPECT_EQ(doc["cases"][0]["kind"], "diffusion_decode");
  EXPECT_TRUE(doc["cases"][0]["flops"]["terms"].contains("stage5.attn_halo"));
  EXPECT_GT(doc["cases"][0]["ours"]["median_ms"].get<double>(), 0);
}

TEST(BenchCli, OfficialDiffusionFileFillsTheDiffusionRow) {
  TempDir dir;
  const std::string off = dir.file("bench_official_diffdec.json");
  const auto run = [](const char* label, int64_t t, double wall) {
    return nlohmann::json{{"label", label}, {"frames", 8 * (t - 1) + 1}, {"latent", {1, 128, t, 32, 48}},
                          {"tiling", "TileSizeConfig(frames=128/40, height=1024/160, width=1536/160)"},
                          {"n_tiles", 1}, {"wall_s", wall}, {"gpu_event_ms", wall * 1e3},
                          {"peak_allocated_GiB", 31.25}, {"peak_reserved_GiB", 33.0}};
  };
  const nlohmann::json doc = {
      {"runs", {run("calibration 25 frames (cold: includes Triton na3d JIT compile)", 4, 50.0),
                run("FULL 121 frames #1", 16, 120.0)}},
      {"env", {{"torch", "2.11.0"}, {"gpu", "NVIDIA H200"}}},
      {"mode", {{"mode", "chunked_eager"}}},
      {"free_bytes", int64_t{139} << 30}};
  test::write_bytes(off, doc.dump(1));
  const auto r = test::run_ltx(dir, {"bench", "flops", "--preset", "ltx25-22b", "--decode-free-gib", "139",
                                     "--official", off});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle : {"120000.0 (eager)", "31.2", "bench_official_diffdec.json"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  EXPECT_EQ(r.err.find("not comparable"), std::string::npos) << r.err;
  // Planned for another budget, ours runs more tiles than the official decode: a warning.
  const auto w = test::run_ltx(dir, {"bench", "flops", "--preset", "ltx25-22b", "--decode-free-gib", "20",
                                     "--official", off});
  ASSERT_EQ(w.code, 0) << w.err;
  for (const char* needle : {"the official decode ran 1 tile(s)", "139.0 GiB free", "not comparable", "--decode-free-gib 139"})
    EXPECT_NE(w.err.find(needle), std::string::npos) << needle << "\n" << w.err;
}

TEST(BenchCli, OfficialFileFillsTheOfficialColumns) {
  TempDir dir;
  const std::string off = dir.file("bench_official.json");
  const nlohmann::json doc = {
      {"env", {{"torch", "2.11.0"}, {"gpu", "NVIDIA H200"}}},
      {"sections",
       {{"LTX-2.3 eager", {{"stage1 768x512", {{"median_ms", 468.6}, {"peak_allocated_GiB", 36.9}}}}},
        {"VAE decode", {{"median_ms", 2078.0}, {"peak_allocated_GiB", 3.55}}}}}};
  test::write_bytes(off, doc.dump());
  const auto r = test::run_ltx(dir, {"bench", "flops", "--official", off});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle : {"468.6 (eager)", "36.9", "2078.0 (eager)", "3.55", "bench_official.json"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
}

TEST(BenchCli, BadFlagsFailWithAMessageAndNoReport) {
  TempDir dir;
  const std::string out = dir.file("never.json");
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--bogus"}, "--bogus"},
      {{"--preset", "huge"}, "huge"},
      {{"everything"}, "everything"},
      {{"--size", "100x64"}, "--size"},
      {{"--size", "64"}, "WIDTHxHEIGHT"},
      {{"--frames", "10"}, "--frames"},
      {{"--frames", "0"}, "--frames"},
      {{"--iters", "0"}, "--iters"},
      {{"--dtype", "bf16"}, "--dtype bf16"},
      {{"--dtype", "fp33"}, "fp33"},
      {{"--device", "tpu"}, "--device"},
      {{"--official", dir.file("missing.json")}, "cannot open"},
      {{"--official-section", "fastest"}, "fastest"},
      {{"--gemm-tflops", "0"}, "--gemm-tflops"},
      {{"--decode-free-gib", "0"}, "--decode-free-gib"},
      {{"diffdec", "--decode-free-gib", "0.5"}, "--decode-free-gib"},
      {{"--max-gpu-memory", "0"}, "--max-gpu-memory 0 must be more than 0 GiB"},
      {{"--max-gpu-memory", "x"}, "--max-gpu-memory 'x' is not a number of GiB"},
      {{"--max-gpu-memory", "4"}, "it does not apply to --device cpu"},
      {{"--quantization", "fp8-scaled-mm"}, "which random weights are not"},
      {{"--quantization", "nvfp4-prequant"}, "--quantization nvfp4-prequant reads the NVFP4 layers"},
      {{"--weights-format", "q3_k"}, "--weights-format: unknown format 'q3_k'; use one of dense, bf16, q8_0"},
      {{"--weights-format", "bf16"}, "--weights-format bf16"},
      {{"--weights-format", "q4_k", "--quantization", "fp8"}, "--quantization fp8"},
  };
  for (const Case& c : cases) {
    // Flags kTiny sets (--device, --iters) must not repeat: CLI11 would reject the repetition.
    const auto r = test::run_ltx(dir, with(with({"bench", "--preset", "tiny", "--warmup", "0"}, c.args),
                                           {"--out", out}));
    EXPECT_NE(r.code, 0) << c.needle;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.needle << ": " << r.err;
    EXPECT_EQ(r.out.find("ours ms"), std::string::npos) << c.needle;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  // The LTX-2.3 preset has no diffusion decoder.
  const auto r = test::run_ltx(dir, {"bench", "diffdec", "--preset", "ltx23-22b"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("no diffusion video decoder"), std::string::npos) << r.err;
}

TEST(BenchCli, CudaWithoutABackendOrGpuSaysSo) {
  if (test::cuda_available()) GTEST_SKIP() << "a GPU is present: the CUDA run is the device machine's";
  TempDir dir;
  const auto r = test::run_ltx(dir, {"bench", "--preset", "tiny", "--device", "cuda", "--iters", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cuda"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

// Every case fails before a kernel runs, on any machine: the flags are checked first and cuda:99
// exists nowhere.
TEST(BenchCli, KernelsChecksItsFlagsBeforeTouchingAGpu) {
  TempDir dir;
  const std::string out = dir.file("never.json");
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"kernels", "--filter", "bogus"}, "--filter: unknown kernel harness 'bogus'; use one of step-kernels, "},
      {{"kernels", "--filter", "fused-glue", "--filter", "attention"}, "unknown kernel harness 'attention'"},
      {{"kernels", "--iters", "3"}, "--iters does not apply to `ltx bench kernels`"},
      {{"kernels", "--preset", "tiny"}, "--preset does not apply to `ltx bench kernels`"},
      {{"kernels", "--device", "cpu"}, "--device cpu: `ltx bench kernels` times CUDA kernels"},
      {{"kernels", "--device", "cuda:99", "--filter", "vae-glue"}, "cuda:99"},
      {{"transformer", "--filter", "fused-glue"}, "--filter applies to `ltx bench kernels` only"},
  };
  for (const Case& c : cases) {
    const auto r = test::run_ltx(dir, with(with({"bench"}, c.args), {"--out", out}));
    EXPECT_EQ(r.code, 1) << c.needle << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.needle << ": " << r.err;
    EXPECT_EQ(r.out, "") << c.needle;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(BenchCli, KernelsWithoutABackendOrGpuSaysSo) {
  if (test::cuda_available()) GTEST_SKIP() << "a GPU is present: the kernel timings are the device machine's";
  TempDir dir;
  const auto r = test::run_ltx(dir, {"bench", "kernels", "--filter", "fused-glue"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cuda:0"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace ltx

namespace ltx {
namespace {

// `ltx bench engine` on the demo bundle at a tiny size: a row per batch size in the JSON report,
// and the checks of its flags.
TEST(BenchEngineCli, TimesEachBatchSizeOnTheDemoBundle) {
  TempDir dir;
  setenv("XDG_CACHE_HOME", dir.file("cache").c_str(), 1);
  const auto r = test::run_ltx(dir, {"--quiet", "bench", "engine", "--pipeline", "one-stage",
                                     "--size", "64x64", "--frames", "9", "--steps", "1", "--jobs",
                                     "2", "--batch", "1", "--batch", "2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["pipeline"], "one-stage");
  ASSERT_EQ(j["rows"].size(), 2u) << r.out;
  EXPECT_EQ(j["rows"][0]["batch"], 1);
  EXPECT_EQ(j["rows"][1]["batch"], 2);
  for (const auto& row : j["rows"]) EXPECT_GT(row["jobs_per_minute"].get<double>(), 0) << r.out;
}

TEST(BenchEngineCli, BadFlagsFailWithAMessage) {
  TempDir dir;
  setenv("XDG_CACHE_HOME", dir.file("cache").c_str(), 1);
  const std::vector<std::string> base = {"bench", "engine", "--size", "64x64", "--frames", "9"};
  auto r = test::run_ltx(dir, with(base, {"--jobs", "4", "--batch", "3"}));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--batch 3: must divide --jobs 4"), std::string::npos) << r.err;
  r = test::run_ltx(dir, with(base, {"--pipeline", "two-stage-hq", "--jobs", "2", "--batch", "2"}));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("does not batch"), std::string::npos) << r.err;
  r = test::run_ltx(dir, with(base, {"--guided"}));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--guided does not apply to `ltx bench engine`"), std::string::npos) << r.err;
  r = test::run_ltx(dir, {"bench", "transformer", "--preset", "tiny", "--jobs", "2"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--jobs applies to `ltx bench engine` only"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ltx

namespace ltx {
namespace {

// `ltx bench pipeline` with the tiny preset: the pipelines of `ltx generate` on random weights
// made in memory, every stage in the report, and the checks of its flags.
const std::vector<std::string> kTinyPipeline = {"--quiet", "bench", "pipeline", "--preset", "tiny",
                                                "--device", "cpu"};

std::vector<std::string> stage_names(const nlohmann::json& j) {
  std::vector<std::string> names;
  for (const auto& s : j["stages"]) names.push_back(s["stage"].get<std::string>());
  return names;
}

TEST(BenchPipelineCli, DistilledReportsEveryStageInJsonAndInTheFile) {
  TempDir dir;
  const std::string out = dir.file("pipeline.json");
  const auto r = test::run_ltx(dir, with(kTinyPipeline, {"--json", "--out", out}));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(nlohmann::json::parse(test::read_bytes(out)), j);
  EXPECT_EQ(j["tool"], "ltx bench");
  EXPECT_EQ(j["bench"], "pipeline");
  EXPECT_EQ(j["pipeline"], "distilled");
  EXPECT_EQ(j["width"], 128);
  EXPECT_EQ(j["height"], 128);
  EXPECT_EQ(j["frames"], 9);
  EXPECT_EQ(stage_names(j),
            (std::vector<std::string>{"text encoding", "model loading", "stage 1", "upsample",
                                      "stage 2", "decoder loading", "audio decode",
                                      "video decode"}));
  // The distilled schedule: 8 steps at half size, 3 after the upsample.
  EXPECT_EQ(j["stages"][2]["steps"], 8);
  EXPECT_EQ(j["stages"][4]["steps"], 3);
  for (const auto& s : j["stages"]) {
    EXPECT_GE(s["seconds"].get<double>(), s["synthesis_seconds"].get<double>()) << s;
    if (s["steps"].get<int64_t>() > 0) {
      EXPECT_GT(s["step_median_ms"].get<double>(), 0) << s;
    }
  }
  // The weights are made while the models load (text encoder, transformer, decoders), and none
  // during the denoising.
  EXPECT_GT(j["stages"][1]["synthesis_seconds"].get<double>(), 0);
  EXPECT_EQ(j["stages"][2]["synthesis_seconds"].get<double>(), 0);
  EXPECT_GT(j["synthesized_parameters"].get<int64_t>(), 0);
  EXPECT_NEAR(j["end_to_end_seconds"].get<double>(),
              j["total_seconds"].get<double>() - j["synthesis_seconds"].get<double>(), 1e-9);
  EXPECT_GT(j["end_to_end_seconds"].get<double>(), 0);
  EXPECT_EQ(j["mp4_encode"]["built"], media::ffmpeg_available());
  EXPECT_EQ(j["lora_switch"]["run"], false);
  // The tail: the MP4 writer on its own thread; on the CPU the audio decodes before the video.
  const nlohmann::json& tail = j["tail"];
  EXPECT_EQ(tail["sink_thread"], true);
  EXPECT_EQ(tail["audio_beside_video"], false);
  EXPECT_GT(tail["audio_decode_busy_seconds"].get<double>(), 0);
  EXPECT_GT(tail["video_decode_busy_seconds"].get<double>(), 0);
  EXPECT_LE(tail["video_decode_busy_seconds"].get<double>(), tail["wall_seconds"].get<double>());
  if (media::ffmpeg_available()) {
    EXPECT_GT(tail["sink_busy_seconds"].get<double>(), 0);
    // The sink thread's time holds the MP4 writer's.
    EXPECT_GE(tail["sink_busy_seconds"].get<double>(), j["mp4_encode"]["seconds"].get<double>());
  }
  EXPECT_EQ(j["decoded_frames"], 9);
  EXPECT_GT(j["audio_samples"].get<int64_t>(), 0);
}

TEST(BenchPipelineCli, TwoStageTableAndASilentFp8Run) {
  TempDir dir;
  auto r = test::run_ltx(dir, with(kTinyPipeline, {"--pipeline", "two-stage", "--steps", "2", "--cache", "fbcache",
                                                   "--cache-warmup-steps", "0"}));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* needle : {"ltx bench pipeline: two-stage, preset tiny, 128x128x9 frames",
                             "--cache fbcache (threshold 0.08, warm-up 0 steps, first 1 block)",
                             "step cache: stage 1 computed 2 of 2 model calls, reused 0",
                             "stage 1", "upsample", "stage 2", "video decode", "step med ms",
                             "peak GiB", "lora switch: not run", "end to end: ",
                             "of weight synthesis",
                             "tail (sink on its own thread, audio before the video): wall "})
    EXPECT_NE(r.out.find(needle), std::string::npos) << needle << "\n" << r.out;
  EXPECT_NE(r.out.find(media::ffmpeg_available() ? "mp4 encode: " : "mp4 encode: not built"),
            std::string::npos)
      << r.out;

  r = test::run_ltx(dir, with(kTinyPipeline, {"--pipeline", "two-stage", "--steps", "2",
                                              "--no-audio", "--size", "192x128",
                                              "--quantization", "fp8-cast",
                                              "--text-encoder-format", "fp8", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stages"][2]["steps"], 2);
  EXPECT_EQ(j["width"], 192);
  EXPECT_EQ(j["audio_samples"], 0);
  EXPECT_EQ(j["quantization"], "fp8-cast");
  EXPECT_EQ(j["text_encoder_format"], "fp8");
  EXPECT_EQ(j["offload"], "none");
  const auto names = stage_names(j);
  EXPECT_EQ(std::count(names.begin(), names.end(), "audio decode"), 0) << r.out;
}

TEST(BenchPipelineCli, BadFlagsFailWithAMessage) {
  TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--pipeline", "one-stage"}, "--pipeline one-stage: `ltx bench pipeline` runs distilled"},
      {{"--pipeline", "nope"}, "nope"},
      {{"--preset", "ltx25-22b"}, "--preset ltx25-22b: this preset has no pipeline models"},
      {{"--iters", "3"}, "--iters does not apply to `ltx bench pipeline`"},
      {{"--size", "100x64"}, "--size: 100x64"},
      {{"--size", "96x64"}, "64"},  // the two-stage pipelines' size rule, from validate_options
      {{"--steps", "0"}, "--steps 0: must be at least 1"},
      {{"--dtype", "f16"}, "--dtype: unknown dtype 'f16'"},
      {{"--size", "128x128", "--size", "192x128"}, "takes one --size"},
      {{"--max-gpu-memory", "24"}, "--max-gpu-memory budgets GPU memory; it does not apply to --device cpu"},
      {{"--offload", "disk"}, "--offload disk streams blocks from the model files"},
      {{"--offload", "cpu"}, "--offload"},
      {{"--quantization", "int3"}, "--quantization"},
      {{"--quantization", "fp8-scaled-mm"}, "which random weights are not"},
      {{"--quantization", "nvfp4-prequant"}, "use --quantization nvfp4-cast"},
      {{"--weights-format", "q3_x"}, "--weights-format: unknown format 'q3_x'"},
      {{"--weights-format", "q4_k", "--quantization", "fp8-cast"}, "--weights-format q4_k"},
      {{"--pipeline", "distilled", "--cache", "fbcache"}, "--cache fbcache: the distilled pipeline"},
      {{"--cache", "fast"}, "--cache fast: unknown mode"},
      {{"--cache-threshold", "0.2"}, "--cache-threshold applies to a step cache; add --cache fbcache"},
  };
  for (const auto& [flags, message] : cases) {
    const std::vector<std::string> preset =
        flags[0] == "--preset" ? std::vector<std::string>{} : std::vector<std::string>{"--preset", "tiny"};
    const auto r = test::run_ltx(
        dir, with(with({"--quiet", "bench", "pipeline", "--device", "cpu"}, preset), flags));
    EXPECT_NE(r.code, 0) << flags[0];
    EXPECT_NE(r.err.find(message), std::string::npos) << flags[0] << ": " << r.err;
    EXPECT_EQ(r.out, "") << flags[0];
  }
  const auto r = test::run_ltx(dir, {"bench", "transformer", "--preset", "tiny", "--mp4", "x.mp4"});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--mp4 applies to `ltx bench pipeline` only"), std::string::npos) << r.err;
  const auto cached = test::run_ltx(dir, {"bench", "transformer", "--preset", "tiny", "--cache", "fbcache"});
  EXPECT_NE(cached.code, 0);
  EXPECT_NE(cached.err.find("--cache applies to `ltx bench pipeline` only"), std::string::npos) << cached.err;
}

// The tiny preset's files, then `ltx generate` started on them as a child: the first run's
// stamped lines reach the first denoising step, and a second call finds the files written.
TEST(BenchColdStartCli, TinyPresetWritesTheFilesAndTimesTheFirstDenoisingStep) {
  TempDir dir;
  const std::string models = dir.file("models");
  const auto r = test::run_ltx(dir, {"bench", "cold-start", "--preset", "tiny", "--dir", models,
                                     "--runs", "1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["written"].size(), 3u) << r.out;
  for (const auto& f : j["files"]) EXPECT_TRUE(std::filesystem::is_regular_file(f.get<std::string>())) << f;
  ASSERT_EQ(j["runs"].size(), 1u);
  const auto& run = j["runs"][0];
  const double start = run["denoising_start_s"].get<double>(), step = run["first_step_s"].get<double>();
  EXPECT_GT(start, 0);
  EXPECT_GE(step, start);
  EXPECT_GE(run["exit_s"].get<double>(), step);
  const int code = run["exit_code"].get<int>();
  EXPECT_TRUE(code == 0 || (code == 130 && run["interrupted"].get<bool>())) << code;
  bool saw_text_stage = false;
  for (const auto& l : run["lines"])
    saw_text_stage |= l["text"].get<std::string>() == "ltx: text encoding ...";
  EXPECT_TRUE(saw_text_stage) << run["lines"].dump(1);

  // The files are complete, so write-models writes nothing and prints the generate flags.
  const auto again = test::run_ltx(dir, {"bench", "write-models", "--preset", "tiny", "--dir", models});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.err.find("wrote"), std::string::npos) << again.err;
  EXPECT_NE(again.out.find("--checkpoint-path " + models + "/tiny-checkpoint.safetensors"),
            std::string::npos) << again.out;
}

TEST(BenchColdStartCli, BadFlagsFailWithAMessage) {
  TempDir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"cold-start"}, "ltx bench cold-start needs --dir DIR"},
      {{"write-models"}, "ltx bench write-models needs --dir DIR"},
      {{"cold-start", "--dir", "d", "--iters", "3"}, "--iters does not apply to `ltx bench cold-start`"},
      {{"write-models", "--dir", "d", "--device", "cpu"}, "--device does not apply to `ltx bench write-models`"},
      {{"transformer", "--dir", "d"}, "--dir applies to `ltx bench write-models` and `ltx bench cold-start` only"},
      {{"cold-start", "--dir", "d", "--runs", "0"}, "--runs"},
      {{"write-models", "--preset", "ltx25-22b", "--dir", "d"}, "--preset ltx25-22b: this preset has no pipeline models"},
  };
  for (const auto& [flags, message] : cases) {
    const bool has_preset = std::find(flags.begin(), flags.end(), "--preset") != flags.end();
    const auto r = test::run_ltx(
        dir, with(has_preset ? std::vector<std::string>{"--quiet", "bench"}
                             : std::vector<std::string>{"--quiet", "bench", "--preset", "tiny"},
                  flags));
    EXPECT_NE(r.code, 0) << flags[0];
    EXPECT_NE(r.err.find(message), std::string::npos) << flags[0] << ": " << r.err;
    EXPECT_EQ(r.out, "") << flags[0];
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("d/tiny-checkpoint.safetensors")));
}

}  // namespace
}  // namespace ltx
