// `ltx generate --enhance-prompt --image` (LTX_BINARY): image-aware prompt enhancement with a
// separate Gemma 3 enhancer that has its vision tower (the tiny text_gemma3_root) on the built-in
// demo bundle end to end, and the refusal of a text encoder without one (the demo's: exit status
// 1, one `ltx: error:` line, no output file).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "generate/generate_test_util.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "media/image.h"
#include "parity/parity.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::enhance_image_cli_test {
namespace {

using test::TempDir;

// `ltx generate` with the demo bundle in the test's own cache folder.
constexpr auto& generate = test::run_generate;

struct Inputs {
  std::string image, system, out;
};

Inputs write_inputs(const TempDir& dir) {
  Inputs in{dir.file("first.png"), dir.file("system.txt"), dir.file("out.mp4")};
  std::vector<uint8_t> px(64 * 128 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 7) % 256);
  media::write_png(in.image, Tensor::from_vector(px, Shape{64, 128, 3}));
  test::write_bytes(in.system, "Describe the video the image starts.");
  return in;
}

TEST(EnhanceImageCli, SeparateGemma3EnhancerSeesTheImage) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const Inputs in = write_inputs(dir);
  const test::CliResult r = generate(
      dir, {"--image", in.image, "0", "1.0", "--enhance-prompt", "--enhance-system-prompt",
            in.system, "--prompt-enhancer-gemma-root", test::fixture("text_gemma3_root"),
            "--prompt", "a ball rolls", "--output-path", in.out, "--num-frames", "9", "--height",
            "64", "--width", "128", "--num-inference-steps", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("enhanced prompt:"), std::string::npos) << r.err;
  test::expect_mp4(in.out, 128, 64, 9, "24/1", 48000);
}

TEST(EnhanceImageCli, ATextEncoderWithoutAVisionTowerIsOneError) {
  TempDir dir;
  const Inputs in = write_inputs(dir);
  const test::CliResult r = generate(
      dir, {"--image", in.image, "0", "1.0", "--enhance-prompt", "--enhance-system-prompt",
            in.system, "--prompt", "a ball rolls", "--output-path", in.out, "--num-frames", "9",
            "--height", "64", "--width", "128", "--num-inference-steps", "2"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("image-aware prompt enhancement"), std::string::npos) << r.err;
  // One error line (the progress lines before it are the demo's and the text stage's).
  size_t errors = 0;
  for (size_t p = r.err.find("ltx: error:"); p != std::string::npos; p = r.err.find("ltx: error:", p + 1))
    ++errors;
  EXPECT_EQ(errors, 1u) << r.err;
  EXPECT_FALSE(std::filesystem::exists(in.out));
}

// `ltx parity gemma-vision` recomputes the reference's recording.
TEST(EnhanceImageCli, ParityComponentRecomputesTheRecording) {
  const std::string io_path = test::fixture("gemma_vision.io.safetensors");
  TempDir dir;
  const std::string out = dir.file("vision.safetensors");
  const test::CliResult r =
      test::run_ltx(dir, {"parity", "gemma-vision", "--weights", test::fixture("text_gemma3_root"),
                          "--inputs", io_path, "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  const io::SafetensorsFile got(out), want(io_path);
  for (const char* name : {"pixel_values", "vision_out", "projector_out", "inputs_embeds",
                           "prefill_logits_tokens"}) {
    ASSERT_TRUE(got.contains(name)) << name;
    if (!want.contains(name)) continue;  // a recording made before this output was added
    const parity::ErrorStats s = parity::compare(got.tensor(name), want.tensor(name));
    EXPECT_LE(s.rel_l2, 1e-5) << name;
  }
  EXPECT_EQ(got.tensor("input_ids").to_int_vector(), want.tensor("input_ids").to_int_vector());
  EXPECT_EQ(got.tensor("generated_ids").to_int_vector(),
            want.tensor("generated_ids").to_int_vector());
}

}  // namespace
}  // namespace ltx::enhance_image_cli_test
