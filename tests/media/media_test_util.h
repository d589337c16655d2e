#pragma once
// Helpers shared by the media tests (the temp folder and error matchers come from the io tests).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/io_test_util.h"
#include "media/support.h"

namespace ltx::test {

#define LTX_REQUIRE_FFMPEG()                                                       \
  do {                                                                             \
    if (!::ltx::media::ffmpeg_available()) GTEST_SKIP() << "built without FFmpeg"; \
  } while (0)
#define LTX_REQUIRE_OPENEXR()                                                       \
  do {                                                                              \
    if (!::ltx::media::openexr_available()) GTEST_SKIP() << "built without OpenEXR"; \
  } while (0)
#define LTX_REQUIRE_IMAGE_IO()                                                          \
  do {                                                                                  \
    if (!::ltx::media::image_io_available()) GTEST_SKIP() << "built without image I/O"; \
  } while (0)

// Names in a folder (files and folders), sorted.
inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Deterministic u8 image [H, W, C] with varied content.
inline Tensor pattern_u8(int64_t h, int64_t w, int64_t c, uint32_t seed) {
  Tensor t = Tensor::empty({h, w, c}, DType::U8);
  uint8_t* p = t.data<uint8_t>();
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 1664525u + 1013904223u;
    p[i] = static_cast<uint8_t>(s >> 24);
  }
  return t;
}

}  // namespace ltx::test
