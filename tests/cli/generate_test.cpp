// Runs `ltx generate` (LTX_BINARY): the built-in demo end to end (checked with ffprobe) and the
// flag errors (one line on stderr, exit status 1, no output file).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "generate/generate_test_util.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "media/temp_output.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::generate_test {
namespace {

using test::TempDir;

// `ltx generate` with the demo bundle in the test's own cache folder.
constexpr auto& generate = test::run_generate;

// SIGTERM / SIGINT in the middle of the denoising loop: the run stops at the next step, says so
// on stderr, exits 128 + the signal and leaves nothing in the output folder (no MP4, no temporary).
// The signal is sent once the child has reported its first stage-1 step (a pipe read, no timing);
// 200 steps leave it far from the end by then.
TEST(GenerateCli, ASignalStopsAtTheNextStepAndLeavesNoFile) {
  for (const int sig : {SIGTERM, SIGINT}) {
    TempDir dir;
    const std::string out_dir = dir.file("out");
    std::filesystem::create_directories(out_dir);
    const std::string out = out_dir + "/clip.mp4", cache = dir.file("cache");
    int err_pipe[2];
    ASSERT_EQ(pipe(err_pipe), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      dup2(err_pipe[1], STDERR_FILENO);
      close(err_pipe[0]);
      close(err_pipe[1]);
      setenv("XDG_CACHE_HOME", cache.c_str(), 1);
      const std::string bin = test::ltx_binary();
      execl(bin.c_str(), bin.c_str(), "generate", "--prompt", "a red ball", "--output-path",
            out.c_str(), "--pipeline", "one-stage", "--num-frames", "9", "--height", "64",
            "--width", "128", "--num-inference-steps", "200", static_cast<char*>(nullptr));
      _exit(127);
    }
    close(err_pipe[1]);
    std::string err;
    bool signalled = false;
    char buf[4096];
    for (ssize_t n; (n = read(err_pipe[0], buf, sizeof buf)) > 0;) {
      err.append(buf, static_cast<size_t>(n));
      if (!signalled && err.find("stage 1: step 1/") != std::string::npos) {
        ASSERT_EQ(kill(pid, sig), 0);
        signalled = true;
      }
    }
    close(err_pipe[0]);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(signalled) << err;
    ASSERT_TRUE(WIFEXITED(status)) << err;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << err;
    EXPECT_NE(err.find(str("ltx: stopped by ", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                           ": cancelled during stage 1, step ")),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("no output was written"), std::string::npos) << err;
    EXPECT_EQ(err.find("stage 1: step 200/200"), std::string::npos) << "ran to its end: " << err;
    EXPECT_TRUE(std::filesystem::is_empty(out_dir)) << "left in the output folder";
  }
}

TEST(GenerateCli, DemoWritesAPlayableMp4WithAudio) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string out = dir.file("out.mp4");
  // The demo at a small size and few steps keeps the test quick; the default pipeline (two-stage:
  // guided stage 1 at half size, x2 upsampler, stage 2 with the distilled LoRA fused) runs.
  const test::CliResult r = generate(dir, {"--prompt", "a red ball bouncing", "--output-path", out,
                                           "--num-frames", "9", "--height", "64", "--width", "128",
                                           "--num-inference-steps", "2", "--frame-rate", "25"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("DEMO"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("RANDOM"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("timings:"), std::string::npos) << r.err;
  for (const char* stage : {"text encoding", "stage 1", "upsample", "stage 2", "video decode"})
    EXPECT_NE(r.err.find(str("ltx: ", stage, " ...")), std::string::npos) << stage << "\n" << r.err;
  // Every component says where it runs.
  for (const char* component :
       {"text encoder", "transformer (denoising loops)", "video encoder (latent statistics)",
        "spatial latent upsampler", "audio decoder", "vocoder", "video decoder"})
    EXPECT_NE(r.err.find(str(component, " runs on CPU (")), std::string::npos)
        << component << "\n" << r.err;
  EXPECT_TRUE(std::filesystem::exists(
      dir.file(str("cache/ltx/", generate::kDemoBundleVersion, "/ltx-2.3-demo.safetensors"))));

  test::expect_mp4(out, 128, 64, 9, "25/1", 48000);
  const nlohmann::json probe = test::ffprobe(out);
  // 9 frames at 25 fps: 0.36 s of video, the audio as long give or take a latent (40 ms).
  const double duration = std::stod(probe["format"]["duration"].get<std::string>());
  EXPECT_NEAR(duration, 0.36, 0.1);
}

// --quantization fp8-cast on the demo: the default two-stage pipeline with the distilled LoRA
// fused onto the e4m3 weights in stage 2, to a playable MP4.
TEST(GenerateCli, Fp8CastDemoWritesAPlayableMp4) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string out = dir.file("out.mp4");
  const test::CliResult r =
      generate(dir, {"--prompt", "a red ball bouncing", "--output-path", out, "--num-frames", "9",
                     "--height", "64", "--width", "128", "--num-inference-steps", "2",
                     "--frame-rate", "25", "--quantization", "fp8-cast"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("transformer (denoising loops) runs on CPU ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(--quantization fp8-cast)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("LoRA: "), std::string::npos) << r.err;  // the distilled LoRA was fused
  test::expect_mp4(out, 128, 64, 9, "25/1", 48000);
}

// --quantization fp8 on the demo: FP8 GEMMs with per-token activation scales, the distilled LoRA
// requantised per tensor onto the e4m3 weights in stage 2.
TEST(GenerateCli, Fp8DemoWritesAPlayableMp4) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string out = dir.file("out.mp4");
  const test::CliResult r =
      generate(dir, {"--prompt", "a red ball bouncing", "--output-path", out, "--num-frames", "9",
                     "--height", "64", "--width", "128", "--num-inference-steps", "2",
                     "--frame-rate", "25", "--quantization", "fp8"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("(--quantization fp8)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("LoRA: "), std::string::npos) << r.err;  // the distilled LoRA was fused
  test::expect_mp4(out, 128, 64, 9, "25/1", 48000);
}

TEST(GenerateCli, BadFlagsFailWithOneErrorLineAndNoOutput) {
  TempDir dir;
  const std::string out = dir.file("out.mp4");
  const std::string missing = dir.file("missing.safetensors");
  // An NVFP4 transformer file (header only matters): only nvfp4-prequant loads it.
  const std::string nvfp4 = dir.file("nvfp4.safetensors");
  io::write_safetensors(
      nvfp4, {{"model.diffusion_model.transformer_blocks.0.attn1.to_q.weight",
               Tensor::zeros({128, 32}, DType::U8)},
              {"model.diffusion_model.transformer_blocks.0.attn1.to_q.weight_scale",
               Tensor::zeros({128, 4}, DType::F8E4M3FN)},
              {"model.diffusion_model.transformer_blocks.0.attn1.to_q.weight_scale_2",
               Tensor::full({}, 1.0)}});
  struct Case {
    std::vector<std::string> args;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"--num-frames", "30"}, "--num-frames 30 must be 8k + 1"},
      {{"--height", "500"}, "--height 500 must be a positive multiple of 64 for the two-stage"},
      {{"--pipeline", "one-stage", "--width", "100"}, "multiple of 32 for the one-stage pipeline"},
      {{"--pipeline", "fancy"}, "unknown pipeline 'fancy'"},
      {{"--frame-rate", "0"}, "--frame-rate 0 must be a positive number"},
      {{"--image", dir.file("nope.png"), "0", "1"},
       "--image '" + dir.file("nope.png") + "': no such file"},
      {{"--image", out, "0"}, "--image takes PATH FRAME_IDX STRENGTH [CRF], got 2 values"},
      {{"--checkpoint-path", missing}, "--checkpoint-path: '" + missing + "' does not exist"},
      {{"--checkpoint-path", out, "--transformer-path", out},
       "--transformer-path (split layout) cannot be combined with --checkpoint-path"},
      {{"--lora", out, "strong"}, "--lora " + out + " STRENGTH: 'strong' is not a number"},
      {{"--pipeline", "distilled", "--video-cfg-guidance-scale", "3"},
       "the distilled pipeline runs without guidance"},
      {{"--temporal-upsample-rounds", "1"},
       "--temporal-upsample-rounds is a flag of --pipeline dfr"},
      {{"--pipeline", "dfr", "--temporal-upsample-rounds", "3"},
       "--temporal-upsample-rounds 3 must be 0, 1 or 2"},
      {{"--auto-duration", "5", "2"}, "--auto-duration 5 2: MIN_SECONDS must be >= 0 and <= MAX"},
      {{"--enhance-system-prompt", out}, "only apply with --enhance-prompt"},
      {{"--device", "gpu"}, "--device: unknown device 'gpu' (expected cpu, cuda or cuda:N)"},
      {{"--max-gpu-memory", "0"}, "--max-gpu-memory 0 must be more than 0 GiB"},
      {{"--max-gpu-memory", "-2"}, "--max-gpu-memory -2 must be more than 0 GiB"},
      {{"--max-gpu-memory", "lots"}, "--max-gpu-memory 'lots' is not a number of GiB"},
      {{"--max-gpu-memory", "23.5"},
       "--max-gpu-memory budgets GPU memory; it does not apply to --device cpu"},
      {{"--quantization", "int4"},
       "--quantization: unknown quantization 'int4'; available: none, fp8-cast, fp8-scaled-mm, "
       "fp8, nvfp4-cast, nvfp4-prequant"},
      {{"--transformer-path", nvfp4, "--quantization", "fp8-cast"},
       nvfp4 + " is a NVFP4 checkpoint; --quantization fp8-cast cannot load it, use "
               "--quantization nvfp4-prequant"},
      {{"--offload", "cpu"}, "--offload cpu streams the transformer's blocks to a GPU; with "
                             "--device cpu use --offload none"},
      {{"--offload", "ram"}, "--offload: 'ram' is not a mode"},
      {{"--offload", "disk"}, "--offload disk streams the transformer's blocks to a GPU"},
      {{"--cache", "teacache9"}, "--cache teacache9: unknown mode; use none (default) or fbcache"},
      {{"--cache", "fbcache", "--cache-threshold", "-1"}, "--cache-threshold -1 must be a number >= 0"},
      {{"--cache-threshold", "0.1"}, "--cache-threshold applies to a step cache; add --cache fbcache"},
      {{"--pipeline", "distilled", "--cache", "fbcache"},
       "--cache fbcache: the distilled pipeline runs only distilled stages"},
      {{"--cache", "fbcache", "--max-batch-size", "1"}, "drop --max-batch-size"},
      // No CUDA in this build, or no such GPU index: either way an error before any work.
      {{"--device", "cuda:99"}, "cuda:99"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--prompt", "a cat", "--output-path", out};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const test::CliResult r = generate(dir, args);
    EXPECT_EQ(r.code, 1) << c.error << "\n" << r.err;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.error;
  }
  // CLI11's own errors (a required flag missing) also exit non-zero without output.
  const test::CliResult r = generate(dir, {"--output-path", out});
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--prompt"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  // No demo bundle was built for any of these (the flags are checked first).
  EXPECT_FALSE(std::filesystem::exists(dir.file("cache/ltx")));
}

// An output path that cannot be written is an error up front, naming the part at fault: before the
// demo bundle is made or any model loads (not after the whole generation).
TEST(GenerateCli, AnUnwritableOutputPathFailsBeforeAnyWork) {
  TempDir dir;
  const std::string file = dir.file("notes.txt");
  test::write_bytes(file, "a file, not a folder");
  std::vector<std::pair<std::string, std::string>> cases = {
      {file + "/out.mp4", "'" + file + "' is a file, not a folder"},
      {file + "/more/folders/out.mp4", "'" + file + "' is a file, not a folder"},
  };
  if (geteuid() != 0) {  // root may write anywhere
    const std::string locked = dir.file("locked");
    std::filesystem::create_directories(locked);
    std::filesystem::permissions(locked, std::filesystem::perms::owner_read |
                                             std::filesystem::perms::owner_exec);
    cases.push_back({locked + "/sub/out.mp4", "no permission to create files in '" + locked + "'"});
  }
  for (const auto& [out, error] : cases) {
    const test::CliResult r = generate(dir, {"--prompt", "a cat", "--output-path", out});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("--output-path: cannot write '" + out + "': "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(error), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("cache/ltx"))) << "work started before the check";
  // A relative path in a folder still to be made is fine (the check creates nothing).
  EXPECT_NO_THROW(media::check_output_location("new/folder/out.mp4", "--output-path"));
  EXPECT_FALSE(std::filesystem::exists("new"));
}

TEST(GenerateCli, DiffusionVideoVaeDecodesTheVideo) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const auto& demo = test::shared_demo_bundle();
  const std::string out = dir.file("out.mp4");
  const std::string vae = test::fixture("diffdec_ltx25.weights.safetensors");
  // The demo transformer with LTX-2.5's tiny diffusion decoder (16-channel latents like it); the
  // one-stage pipeline needs no video encoder, which the decoder file lacks.
  const std::vector<std::string> models = {"--checkpoint-path", demo.checkpoint,
                                           "--text-encoder-path", demo.text_encoder,
                                           "--video-vae-path", vae};
  std::vector<std::string> args = {"--prompt", "a red ball", "--output-path", out,
                                   "--pipeline", "one-stage", "--num-frames", "9",
                                   "--height", "64", "--width", "96",
                                   "--num-inference-steps", "2", "--frame-rate", "25"};
  args.insert(args.end(), models.begin(), models.end());
  const test::CliResult r = generate(dir, args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("ltx: video decode ..."), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("diffusion video decoder runs on CPU ("), std::string::npos) << r.err;
  test::expect_mp4(out, 96, 64, 9, "25/1", 48000);

  // The two-stage pipeline encodes latents for its upsampler: the missing encoder is named.
  const std::string out2 = dir.file("out2.mp4");
  std::vector<std::string> two = {"--prompt", "a red ball", "--output-path", out2,
                                  "--spatial-upsampler-path", demo.spatial_upsampler,
                                  "--distilled-lora", demo.distilled_lora};
  two.insert(two.end(), models.begin(), models.end());
  const test::CliResult r2 = generate(dir, two);
  EXPECT_EQ(r2.code, 1) << r2.err;
  EXPECT_NE(r2.err.find("--video-vae-path '" + vae + "' has no video VAE encoder"),
            std::string::npos)
      << r2.err;
  EXPECT_FALSE(std::filesystem::exists(out2));
}

TEST(GenerateCli, MissingComponentsNameTheFlag) {
  TempDir dir;
  const auto& demo = test::shared_demo_bundle();
  const std::string out = dir.file("out.mp4");
  const test::CliResult r =
      generate(dir, {"--prompt", "a cat", "--output-path", out, "--checkpoint-path",
                     demo.checkpoint, "--text-encoder-path", demo.text_encoder,
                     "--spatial-upsampler-path", demo.spatial_upsampler});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("the two-stage pipeline needs the distilled LoRA"), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace ltx::generate_test
