// run_generation into a MemorySink: the whole `ltx generate` path (demo bundle, text encoding,
// pipeline, decoders) without an MP4 file, so it runs in builds without FFmpeg. The stages'
// allocation counts say where each component's work ran.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "generate/generate_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

TEST(GenerateInMemory, DemoGivesFramesAndAudioWithoutAFile) {
  generate::GenerateOptions o = test::small_demo_options("two-stage", 64, 64);
  const test::InMemoryGeneration g = test::generate_in_memory(o);
  EXPECT_TRUE(g.result.demo);
  EXPECT_TRUE(g.result.output_path.empty());
  const generate::DecodedMedia& m = g.media;
  ASSERT_TRUE(m.frames.defined());
  EXPECT_TRUE(m.frames.device().is_cpu());
  EXPECT_EQ(m.frames.dtype(), DType::F32);
  EXPECT_EQ(m.frames.shape(), (Shape{9, 64, 64, 3}));
  const std::vector<float> px = m.frames.to_float_vector();
  EXPECT_GE(*std::min_element(px.begin(), px.end()), 0.0f);
  EXPECT_LE(*std::max_element(px.begin(), px.end()), 1.0f);
  EXPECT_GT(*std::max_element(px.begin(), px.end()), *std::min_element(px.begin(), px.end()));
  EXPECT_EQ(m.format.fps, g.result.frame_rate);
  EXPECT_EQ(m.format.audio_sample_rate, 48000);
  ASSERT_TRUE(m.waveform.defined());
  EXPECT_EQ(m.waveform.dim(), 2);
  EXPECT_EQ(m.waveform.size(0), m.format.audio_channels);
  EXPECT_EQ(m.waveform.size(1), g.result.decoded.audio_samples);
  EXPECT_GT(g.result.decoded.audio_samples, 0);
  EXPECT_EQ(g.result.decoded.frames, 9);
}

TEST(GenerateInMemory, EveryComponentWorksOnTheHostOnTheCpu) {
  const test::InMemoryGeneration g =
      test::generate_in_memory(test::small_demo_options("two-stage", 64, 64));
  for (const char* stage :
       {"text encoding", "stage 1", "upsample", "stage 2", "audio decode", "video decode"}) {
    const auto& t = g.stage(stage);
    EXPECT_GT(t.allocations.host, 0) << stage;
    EXPECT_EQ(t.allocations.cuda, 0) << stage;
  }
}

TEST(GenerateInMemory, RejectsPrecisionsItCannotRun) {
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.dtype = DType::F16;
  EXPECT_ERROR_HAS(test::generate_in_memory(o), "dtype f16 is not supported (bf16 or f32)");
  // A sink needs no output path; the MP4 entry point still does.
  o.dtype = DType::F32;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  EXPECT_ERROR_HAS(generate::run_generation(o, progress), "--output-path is empty");
}

}  // namespace
}  // namespace ltx
