// `ltx generate --pipeline t2a / a2vid` (LTX_BINARY) on the built-in demo: the WAV and the MP4 they
// write (read back through libav / ffprobe), and their flag and input errors (exit status 1, an
// error line naming the flag or file, no output file).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "generate/generate_test_util.h"
#include "io/io_test_util.h"
#include "media/audio.h"
#include "media/support.h"
#include "media/video_reader.h"
#include "support/cli_runner.h"
#include "support/test_support.h"

namespace ltx::generate_audio_test {
namespace {

using test::TempDir;

// `ltx generate` with the demo bundle in the test's own cache folder.
constexpr auto& generate = test::run_generate;

// A stereo soundtrack of `seconds` at `rate` (two tones), written as a WAV.
std::string soundtrack(const TempDir& dir, int rate, double seconds) {
  const int64_t n = static_cast<int64_t>(std::llround(rate * seconds));
  std::vector<float> v(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / rate;
    v[static_cast<size_t>(i)] = static_cast<float>(0.5 * std::sin(2 * M_PI * 220 * t));
    v[static_cast<size_t>(n + i)] = static_cast<float>(0.3 * std::sin(2 * M_PI * 550 * t));
  }
  const std::string path = dir.file("soundtrack.wav");
  media::write_wav(path, Tensor::from_vector(v, Shape{2, n}), rate);
  return path;
}

// The last line of stderr (the error, after the demo bundle's notice when it was made).
std::string last_line(const std::string& err) {
  std::string s = err;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

TEST(GenerateAudioCli, T2ADemoWritesA16BitWav) {
  if (!media::ffmpeg_available()) GTEST_SKIP() << "this build has no FFmpeg to read the WAV back";
  TempDir dir;
  const std::string out = dir.file("rain.wav");
  const test::CliResult r = generate(dir, {"--pipeline", "t2a", "--prompt", "rain on a tin roof", "--output-path",
                                           out, "--num-frames", "9", "--num-inference-steps", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("samples of audio at 48000 Hz"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("video decode"), std::string::npos) << r.err;
  const media::MediaInfo info = media::probe_media(out);
  ASSERT_EQ(info.streams.size(), 1u);
  EXPECT_EQ(info.format, "wav");
  EXPECT_EQ(info.streams[0].codec, "pcm_s16le");
  EXPECT_EQ(info.streams[0].sample_rate, 48000);
  EXPECT_EQ(info.streams[0].channels, 2);
  // 9 frames at 24 fps: 0.375 s, give or take a latent frame (40 ms).
  EXPECT_NEAR(info.duration, 0.375, 0.05);
  // --output-format wav names the format when the path has no extension.
  const std::string bare = dir.file("rain_bare");
  const test::CliResult r2 = generate(dir, {"--pipeline", "t2a", "--prompt", "rain on a tin roof", "--output-path",
                                            bare, "--output-format", "wav", "--num-frames", "9",
                                            "--num-inference-steps", "2"});
  ASSERT_EQ(r2.code, 0) << r2.err;
  EXPECT_EQ(media::probe_media(bare).streams.at(0).codec, "pcm_s16le");
}

TEST(GenerateAudioCli, A2VidDemoWritesTheVideoWithTheInputAudio) {
  if (const std::string why = test::mp4_check_unavailable(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  const std::string wav = soundtrack(dir, 44100, 1.0);
  const std::string out = dir.file("drums.mp4");
  const test::CliResult r =
      generate(dir, {"--pipeline", "a2vid", "--prompt", "a drummer on a stage", "--output-path", out, "--audio-path",
                     wav, "--audio-start-time", "0.25", "--num-frames", "9", "--height", "64", "--width", "128",
                     "--num-inference-steps", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* stage : {"audio conditioning", "stage 1", "upsample", "stage 2", "video decode"})
    EXPECT_NE(r.err.find(str("ltx: ", stage, " ...")), std::string::npos) << stage << "\n" << r.err;
  EXPECT_NE(r.err.find("audio encoder (input audio) runs on CPU"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("audio decode"), std::string::npos) << r.err;  // the input is muxed, not decoded
  test::expect_mp4(out, 128, 64, 9, "24/1", 44100);  // the soundtrack's own rate
}

TEST(GenerateAudioCli, BadAudioFlagsAndInputsFailWithNoOutput) {
  if (!media::ffmpeg_available()) GTEST_SKIP() << "this build has no FFmpeg to decode the soundtrack";
  TempDir dir;
  const std::string wav = soundtrack(dir, 16000, 0.5);
  const std::string text = dir.file("notes.wav");
  std::ofstream(text) << "not audio";
  const std::string mono = dir.file("mono.wav");
  media::write_wav(mono, Tensor::zeros({1, 16000}), 16000);
  const std::string mp4 = dir.file("out.mp4"), out_wav = dir.file("out.wav");
  struct Case {
    std::vector<std::string> args;
    std::string output;
    std::string error;
  };
  const std::vector<Case> cases = {
      {{"--pipeline", "a2vid"}, mp4, "--pipeline a2vid needs --audio-path"},
      {{"--pipeline", "a2vid", "--audio-path", dir.file("nope.wav")}, mp4,
       "--audio-path '" + dir.file("nope.wav") + "': no such file"},
      {{"--pipeline", "a2vid", "--audio-path", wav, "--audio-start-time", "-1"}, mp4,
       "--audio-start-time -1 must be a number of seconds >= 0"},
      {{"--pipeline", "a2vid", "--audio-path", wav, "--audio-max-duration", "0"}, mp4,
       "--audio-max-duration 0 must be a positive number of seconds"},
      {{"--audio-path", wav}, mp4, "are flags of --pipeline a2vid"},
      {{"--pipeline", "t2a"}, mp4, "--pipeline t2a generates audio only: name a .wav --output-path"},
      {{"--pipeline", "t2a", "--height", "64"}, out_wav, "--height / --width: the t2a pipeline generates audio only"},
      {{"--pipeline", "t2a", "--video-cfg-guidance-scale", "2"}, out_wav, "do not apply to --pipeline t2a"},
      {{"--pipeline", "t2a", "--output-format", "mp4"}, out_wav, "ends in .wav but --output-format is mp4"},
      {{"--output-format", "wav"}, mp4, "ends in .mp4 but --output-format is wav"},
      {{"--output-format", "flac"}, mp4, "--output-format 'flac' is not a known format"},
      {{}, out_wav, "--output-format wav holds audio only"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--prompt", "a cat", "--output-path", c.output};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const test::CliResult r = generate(dir, args);
    EXPECT_EQ(r.code, 1) << c.error << "\n" << r.err;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(c.output)) << c.error;
  }
  // Inputs found bad when read (after the demo bundle is ready): the error is the last line.
  const std::vector<Case> inputs = {
      {{"--audio-path", text}, mp4, "--audio-path '" + text + "': cannot open"},
      {{"--audio-path", wav, "--audio-start-time", "0.5"}, mp4, "--audio-start-time 0.5 s is at or past the end"},
      {{"--audio-path", wav, "--audio-start-time", "0.3"}, mp4, "--audio-path: the audio gives"},
      {{"--audio-path", mono}, mp4, "--audio-path: the audio has 1 channel(s) but the audio VAE encoder"},
  };
  for (const Case& c : inputs) {
    std::vector<std::string> args = {"--prompt", "a cat", "--output-path", c.output, "--pipeline", "a2vid",
                                     "--num-frames", "9", "--height", "64", "--width", "128"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const test::CliResult r = generate(dir, args);
    EXPECT_EQ(r.code, 1) << c.error << "\n" << r.err;
    EXPECT_NE(last_line(r.err).find(c.error), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(c.output)) << c.error;
  }
}

}  // namespace
}  // namespace ltx::generate_audio_test
