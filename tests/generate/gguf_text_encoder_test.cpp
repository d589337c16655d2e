// `ltx generate` with a llama.cpp Gemma 3 GGUF as the text encoder (--text-encoder-path x.gguf):
// the demo bundle's Gemma written as llama.cpp would (F32), one tiny one-stage generation against
// the same run with the demo's safetensors text encoder; image-aware --enhance-prompt refused
// before any model loads.
#include <gtest/gtest.h>

#include "generate/generate.h"
#include "generate/generate_test_util.h"
#include "generate/progress.h"
#include "io/io_test_util.h"
#include "support/gemma_gguf.h"
#include "support/test_support.h"

namespace ltx {
namespace {

generate::ModelFlags flags_with_text_encoder(const std::string& text_encoder) {
  generate::ModelFlags f;
  f.checkpoint_path = test::shared_demo_bundle().checkpoint;
  f.text_encoder_path = text_encoder;
  return f;
}

TEST(GgufTextEncoder, GeneratesWhatTheSafetensorsTextEncoderGenerates) {
  const auto& demo = test::shared_demo_bundle();
  test::TempDir dir;
  const std::string gguf = dir.file("gemma-3-demo-F32.gguf");
  test::write_llama_gemma3_gguf(demo.text_encoder, gguf);
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.demo_dir.clear();
  o.num_inference_steps = 1;
  o.models = flags_with_text_encoder(gguf);
  const test::InMemoryGeneration g = test::generate_in_memory(o);
  o.models = flags_with_text_encoder(demo.text_encoder);
  const test::InMemoryGeneration s = test::generate_in_memory(o);
  ASSERT_TRUE(g.media.frames.defined() && s.media.frames.defined());
  // The same weights; the GGUF's epsilon and attention scale are f32 values of the config's.
  EXPECT_LT(test::max_abs_diff(g.media.frames, s.media.frames), 1e-4);
  EXPECT_LT(test::max_abs_diff(g.media.waveform, s.media.waveform), 1e-4);
}

TEST(GgufTextEncoder, ImageAwareEnhancementIsRefusedBeforeAnyModelLoads) {
  test::TempDir dir;
  const std::string gguf = dir.file("gemma-3-demo-F32.gguf");
  test::write_llama_gemma3_gguf(test::shared_demo_bundle().text_encoder, gguf);
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.demo_dir.clear();
  o.models = flags_with_text_encoder(gguf);
  o.enhance_prompt = true;
  o.images = {{"first-frame.png", 0, 1.0, std::nullopt}};
  generate::Progress quiet(nullptr, generate::Progress::Mode::Off);
  test::expect_error_containing(
      [&] { (void)generate::resolve_models(o, generate::component_needs(o), quiet); },
      {"--enhance-prompt with an image", gguf, "mmproj", "--prompt-enhancer-gemma-root"});
  // Text-only enhancement and plain encoding pass the checks.
  o.images.clear();
  (void)generate::resolve_models(o, generate::component_needs(o), quiet);
}

}  // namespace
}  // namespace ltx
