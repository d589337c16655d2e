#pragma once
// Small real media files for the server's upload tests: an H.264 MP4 clip (with or without an
// AAC track), a 16-bit WAV, an OpenEXR still and a text-embeddings safetensors file, written by
// media/ and io/ and read back as bytes.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "media/audio.h"
#include "media/exr.h"
#include "media/video_writer.h"

namespace ltx::server::test {

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string scratch_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name()))
      .string();
}

// A tone of `seconds` at `rate` Hz, [channels, N] f32.
inline Tensor tone(double seconds, int rate, int64_t channels = 1) {
  const auto n = static_cast<int64_t>(std::llround(seconds * rate));
  Tensor w = Tensor::zeros({channels, n}, DType::F32);
  float* p = w.data<float>();
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < n; ++i)
      p[c * n + i] = 0.3f * static_cast<float>(std::sin(2.0 * M_PI * 440.0 * i / rate));
  return w;
}

// An MP4 of `frames` frames of w x h at `fps` (a gradient that moves), with a stereo tone when
// `audio`.
inline std::string mp4_clip(int64_t frames, int64_t w, int64_t h, double fps, bool audio = false) {
  Tensor v = Tensor::zeros({frames, h, w, 3}, DType::F32);
  float* p = v.data<float>();
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t c = 0; c < 3; ++c)
          p[((f * h + y) * w + x) * 3 + c] =
              static_cast<float>((x + y + 4 * f + 20 * c) % 64) / 63.0f;
  const std::string path = scratch_path("ltx-clip") + ".mp4";
  media::AudioTrack track{tone(static_cast<double>(frames) / fps, 16000, 2), 16000};
  media::write_mp4(path, v, fps, audio ? &track : nullptr);
  std::string bytes = read_bytes(path);
  std::filesystem::remove(path);
  return bytes;
}

inline std::string wav_clip(double seconds, int rate = 16000, int64_t channels = 1) {
  const std::string path = scratch_path("ltx-tone") + ".wav";
  media::write_wav(path, tone(seconds, rate, channels), rate);
  std::string bytes = read_bytes(path);
  std::filesystem::remove(path);
  return bytes;
}

// An OpenEXR still of w x h (half float R G B, scene-linear values up to 4): needs OpenEXR.
inline std::string exr_still(int64_t w, int64_t h) {
  Tensor img = Tensor::zeros({h, w, 3}, DType::F32);
  float* p = img.data<float>();
  for (int64_t i = 0; i < h * w * 3; ++i) p[i] = static_cast<float>(i % 97) / 24.0f;
  const std::string path = scratch_path("ltx-still") + ".exr";
  media::write_exr(path, img);
  std::string bytes = read_bytes(path);
  std::filesystem::remove(path);
  return bytes;
}

// hdr-ic-lora's precomputed text contexts as the reference's script writes them: video_context
// and audio_context, [1, tokens, dim] each; `video` false leaves video_context out.
inline std::string text_embeddings_file(int64_t tokens, int64_t dim, bool video = true) {
  const std::string path = scratch_path("ltx-embeddings") + ".safetensors";
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"audio_context", Tensor::zeros({1, tokens, dim})}};
  if (video) tensors.push_back({"video_context", Tensor::full({1, tokens, dim}, 0.25)});
  io::write_safetensors(path, tensors);
  std::string bytes = read_bytes(path);
  std::filesystem::remove(path);
  return bytes;
}

// `frames` EXR frames of w x h (frame_00000.exr, ...; the last one `last_width` wide when given)
// as a tar written by GNU tar (the system's `tar`, not our code), inside a folder `shot/` as a
// user would pack them.
inline std::string exr_frames_tar(int64_t frames, int64_t w, int64_t h, int64_t last_width = 0) {
  const std::string dir = scratch_path("ltx-exr-seq");
  std::filesystem::create_directories(dir + "/shot");
  for (int64_t f = 0; f < frames; ++f) {
    const int64_t fw = f == frames - 1 && last_width > 0 ? last_width : w;
    Tensor img = Tensor::zeros({h, fw, 3}, DType::F32);
    float* p = img.data<float>();
    for (int64_t i = 0; i < h * fw * 3; ++i) p[i] = static_cast<float>((i + 7 * f) % 97) / 24.0f;
    char name[64];
    std::snprintf(name, sizeof name, "/shot/frame_%05lld.exr", static_cast<long long>(f));
    media::write_exr(dir + name, img);
  }
  const std::string tar = dir + ".tar";
  const std::string cmd = "tar --create --file '" + tar + "' --directory '" + dir + "' shot";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string bytes = read_bytes(tar);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(tar);
  return bytes;
}

}  // namespace ltx::server::test
