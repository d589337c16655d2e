#pragma once
// Shared by the generate tests: the demo bundle written once per test binary into a temporary
// folder (about a second), and ffprobe for checking MP4 files.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generate/decode.h"
#include "generate/demo_bundle.h"
#include "generate/generate.h"
#include "generate/progress.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "media/support.h"
#include "support/test_support.h"

namespace ltx::test {

inline const generate::DemoBundle& shared_demo_bundle() {
  static const std::string dir = (std::filesystem::temp_directory_path() /
                                  ("ltx_demo_bundle_test_" + std::to_string(::getpid())))
                                     .string();
  static const generate::DemoBundle bundle = [] {
    std::filesystem::remove_all(dir);
    generate::DemoBundle b = generate::ensure_demo_bundle(dir);
    std::atexit([] { std::filesystem::remove_all(dir); });
    return b;
  }();
  return bundle;
}

// The built-in demo (the shared bundle) at a small size: `pipeline`, height x width, 9 frames, 2
// steps.
inline generate::GenerateOptions small_demo_options(const std::string& pipeline, int64_t height,
                                                    int64_t width) {
  generate::GenerateOptions o;
  o.pipeline = pipeline;
  o.prompt = "a red ball bouncing on a wooden floor";
  o.demo_dir = shared_demo_bundle().dir;
  o.height = height;
  o.width = width;
  o.num_frames = 9;
  if (pipeline != "distilled") o.num_inference_steps = 2;
  return o;
}

// A copy of the shared demo bundle in `dir` whose checkpoint has every value of `tensor` (e.g.
// "model.diffusion_model.proj_out.bias") replaced by `value` (NaN, an infinity): the tiny model
// with a broken weight. Returns the copy's folder, for GenerateOptions::demo_dir.
inline std::string demo_bundle_with_weight(const std::string& dir, const std::string& tensor, float value) {
  namespace fs = std::filesystem;
  const generate::DemoBundle& b = shared_demo_bundle();
  fs::copy(b.dir, dir, fs::copy_options::recursive);
  const std::string ckpt = (fs::path(dir) / fs::path(b.checkpoint).filename()).string();
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  {
    const io::SafetensorsFile f(ckpt);
    metadata = f.metadata();
    for (const std::string& name : f.names()) {
      Tensor t = f.tensor(name).clone();
      if (name == tensor) t = Tensor::full(t.shape(), value, t.dtype());
      tensors.emplace_back(name, t);
    }
    EXPECT_TRUE(f.contains(tensor)) << "the demo checkpoint has no " << tensor;
  }
  io::write_safetensors(ckpt, tensors, metadata);
  return dir;
}

// One generation into memory (no FFmpeg needed): the result, the decoded media and the stages'
// timings with their allocation counts.
struct InMemoryGeneration {
  generate::GenerateResult result;
  generate::DecodedMedia media;
  std::vector<generate::Progress::Timing> timings;

  // The stage's timing entry; fails the test when the run had no such stage.
  const generate::Progress::Timing& stage(const std::string& name) const {
    for (const auto& t : timings)
      if (t.stage == name) return t;
    ADD_FAILURE() << "the run has no stage '" << name << "'";
    static const generate::Progress::Timing none;
    return none;
  }
};

inline InMemoryGeneration generate_in_memory(const generate::GenerateOptions& options) {
  generate::MemorySink sink;
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  InMemoryGeneration g;
  g.result = generate::run_generation(options, progress, sink);
  progress.end_stage();
  g.media = sink.media();
  g.timings = progress.timings();
  return g;
}

// Why MP4 files cannot be checked here ("" when they can): no FFmpeg in this build, or no
// ffprobe on the PATH.
inline std::string mp4_check_unavailable() {
  if (!media::ffmpeg_available()) return "this build has no FFmpeg (LTX_FFMPEG=OFF)";
  if (std::system("command -v ffprobe >/dev/null 2>&1") != 0) return "ffprobe is not installed";
  return "";
}

// ffprobe's view of a media file: {"streams": [{codec_type, codec_name, nb_read_frames,
// r_frame_rate, sample_rate, channels, width, height, ...}], "format": {duration, ...}}.
inline nlohmann::json ffprobe(const std::string& path) {
  const std::string cmd = "ffprobe -v error -count_frames -show_streams -show_format -of json '" +
                          path + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return nullptr;
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (pclose(p) != 0) return nullptr;
  return nlohmann::json::parse(out, nullptr, false);
}

inline const nlohmann::json* stream_of(const nlohmann::json& probe, const std::string& type) {
  if (!probe.is_object() || !probe.contains("streams")) return nullptr;
  for (const auto& s : probe["streams"])
    if (s.value("codec_type", "") == type) return &s;
  return nullptr;
}

// What an MP4 written by ltx must hold: H.264 yuv420p video of that size, frame count and rate,
// and (when audio_rate > 0) a stereo AAC track at that rate.
inline void expect_mp4(const std::string& path, int64_t width, int64_t height, int64_t frames,
                       const std::string& frame_rate, int64_t audio_rate) {
  const nlohmann::json probe = ffprobe(path);
  const nlohmann::json* v = stream_of(probe, "video");
  const nlohmann::json* a = stream_of(probe, "audio");
  ASSERT_NE(v, nullptr) << path << ": " << probe.dump();
  EXPECT_EQ((*v)["codec_name"], "h264");
  EXPECT_EQ((*v)["pix_fmt"], "yuv420p");
  EXPECT_EQ((*v)["width"], width);
  EXPECT_EQ((*v)["height"], height);
  EXPECT_EQ((*v)["nb_read_frames"], std::to_string(frames));
  EXPECT_EQ((*v)["r_frame_rate"], frame_rate);
  if (audio_rate <= 0) {
    EXPECT_EQ(a, nullptr) << probe.dump();
    return;
  }
  ASSERT_NE(a, nullptr) << path << ": " << probe.dump();
  EXPECT_EQ((*a)["codec_name"], "aac");
  EXPECT_EQ((*a)["channels"], 2);
  EXPECT_EQ((*a)["sample_rate"], std::to_string(audio_rate));
}

}  // namespace ltx::test
