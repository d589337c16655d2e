#pragma once
// Shared by the generate tests: the demo bundle written once per test binary into a temporary
// folder (about a second), and ffprobe for checking MP4 files.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "generate/demo_bundle.h"
#include "io/io_test_util.h"
#include "media/support.h"

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
