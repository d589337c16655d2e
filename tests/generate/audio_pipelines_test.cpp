// The audio pipelines through generate (the demo bundle, into memory): t2a gives a waveform and no
// frames; a2vid generates frames to a soundtrack and hands the input audio itself to the sink, as
// the reference muxes it; and how the output format is chosen.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "generate/generate.h"
#include "generate/generate_test_util.h"
#include "media/audio.h"
#include "media/video_reader.h"
#include "support/test_support.h"

namespace ltx {
namespace {

TEST(AudioPipelinesGenerate, T2ADemoGivesAudioOnly) {
  generate::GenerateOptions o = test::small_demo_options("t2a", 64, 64);
  o.height.reset();  // audio only: the pipeline takes no size
  o.width.reset();
  const test::InMemoryGeneration g = test::generate_in_memory(o);
  EXPECT_EQ(g.result.pipeline, "t2a");
  EXPECT_FALSE(g.media.frames.defined());
  ASSERT_TRUE(g.media.waveform.defined());
  EXPECT_EQ(g.media.waveform.dim(), 2);
  EXPECT_EQ(g.media.waveform.size(0), 2);
  EXPECT_GT(g.media.waveform.size(1), 0);
  EXPECT_EQ(g.media.format.audio_sample_rate, 48000);
  EXPECT_EQ(g.result.decoded.frames, 0);
  EXPECT_EQ(g.result.decoded.audio_samples, g.media.waveform.size(1));
  // Deterministic.
  EXPECT_TRUE(test::same_bits(test::generate_in_memory(o).media.waveform, g.media.waveform));
}

TEST(AudioPipelinesGenerate, A2VidDemoMuxesTheInputAudio) {
  if (!media::ffmpeg_available()) GTEST_SKIP() << "this build has no FFmpeg";
  test::TempDir dir;
  const int64_t rate = 44100, n = 44100;
  std::vector<float> v(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / static_cast<double>(rate);
    v[static_cast<size_t>(i)] = static_cast<float>(0.5 * std::sin(2 * M_PI * 220 * t));
    v[static_cast<size_t>(n + i)] = static_cast<float>(0.3 * std::sin(2 * M_PI * 550 * t));
  }
  const std::string wav = dir.file("soundtrack.wav");
  media::write_wav(wav, Tensor::from_vector(v, Shape{2, n}), static_cast<int>(rate));

  generate::GenerateOptions o = test::small_demo_options("a2vid", 64, 128);
  o.audio_path = wav;
  o.audio_start_time = 0.1;
  const test::InMemoryGeneration g = test::generate_in_memory(o);
  ASSERT_TRUE(g.media.frames.defined());
  EXPECT_EQ(g.media.frames.shape(), (Shape{9, 64, 128, 3}));
  // The soundtrack from 0.1 s for the video's 9 / 24 s, at its own rate.
  const media::AudioTrack expected = media::read_audio_clip(wav, 0.1, 9.0 / 24.0);
  EXPECT_EQ(g.media.format.audio_sample_rate, rate);
  EXPECT_TRUE(test::same_bits(g.media.waveform, expected.waveform));
  EXPECT_EQ(g.media.waveform.size(1), 16538);  // round(0.375 * 44100): 16537.5 to even
  for (const char* stage : {"audio conditioning", "stage 1", "upsample", "stage 2", "video decode"})
    (void)g.stage(stage);

  // --audio-max-duration cuts the input; the video needs 0.375 s of it.
  o.audio_max_duration = 0.2;
  EXPECT_ERROR_HAS(test::generate_in_memory(o), "--audio-path: the audio gives");
}

TEST(AudioPipelinesGenerate, OutputFormatFromTheFlagOrTheExtension) {
  using generate::OutputFormat;
  EXPECT_EQ(generate::resolve_output_format("", "a/b.wav"), OutputFormat::Wav);
  EXPECT_EQ(generate::resolve_output_format("", "B.WAV"), OutputFormat::Wav);
  EXPECT_EQ(generate::resolve_output_format("", "b.mp4"), OutputFormat::Mp4);
  EXPECT_EQ(generate::resolve_output_format("", "b"), OutputFormat::Mp4);
  EXPECT_EQ(generate::resolve_output_format("wav", "b"), OutputFormat::Wav);
  EXPECT_EQ(generate::resolve_output_format("mp4", "b.mov"), OutputFormat::Mp4);
  EXPECT_ERROR_HAS(generate::resolve_output_format("wav", "b.mp4"), "ends in .mp4 but --output-format is wav");
  EXPECT_ERROR_HAS(generate::resolve_output_format("flac", "b.flac"), "--output-format 'flac' is not a known format");
  EXPECT_STREQ(generate::output_format_name(OutputFormat::Wav), "wav");
}

TEST(AudioPipelinesGenerate, FlagsThatDoNotFitThePipelineAreRefused) {
  const auto with = [](const std::string& pipeline, const std::function<void(generate::GenerateOptions&)>& edit) {
    generate::GenerateOptions o;
    o.pipeline = pipeline;
    o.prompt = "rain";
    o.output_path = pipeline == "t2a" ? "out.wav" : "out.mp4";
    edit(o);
    return o;
  };
  EXPECT_ERROR_HAS(generate::validate_options(with("t2a", [](auto& o) { o.output_path = "out.mp4"; })),
                   "generates audio only: name a .wav --output-path");
  EXPECT_ERROR_HAS(generate::validate_options(with("t2a", [](auto& o) { o.height = 64; })),
                   "--height / --width: the t2a pipeline generates audio only");
  EXPECT_ERROR_HAS(generate::validate_options(with("t2a", [](auto& o) { o.video_guidance.cfg = 3.0; })),
                   "do not apply to --pipeline t2a");
  EXPECT_ERROR_HAS(generate::validate_options(with("two-stage", [](auto& o) { o.output_path = "x.wav"; })),
                   "--output-format wav holds audio only");
  EXPECT_ERROR_HAS(generate::validate_options(with("two-stage", [](auto& o) { o.audio_path = "a.wav"; })),
                   "are flags of --pipeline a2vid");
  EXPECT_ERROR_HAS(generate::validate_options(with("a2vid", [](auto&) {})), "--pipeline a2vid needs --audio-path");
  EXPECT_ERROR_HAS(generate::validate_options(with("a2vid", [](auto& o) { o.audio_path = "/nonexistent/a.wav"; })),
                   "--audio-path '/nonexistent/a.wav': no such file");
}

}  // namespace
}  // namespace ltx
