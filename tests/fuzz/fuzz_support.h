#pragma once
// What the fuzz targets share (tests/fuzz/, docs/FUZZING.md): splitting one input into parts and
// the policy for exceptions. A parser may reject any input with the error type of its layer
// (ltx::Error; the server's ApiError); every other exception escaping it (a JSON library type
// error, std::out_of_range, std::bad_alloc from a size nobody checked) is a bug, so the targets
// catch only those two and let anything else reach libFuzzer, which reports it as a crash.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/log.h"

namespace ltx::fuzz {

// The input as text.
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The input cut at every NUL byte into exactly `n` parts (missing parts are empty, the last part
// keeps any further NULs): how a target that reads several files or strings takes them from one
// input. Seeds are written the same way (tests/fuzz/make_seeds.py).
inline std::vector<std::string> split_parts(const uint8_t* data, size_t size, size_t n) {
  std::vector<std::string> parts(n);
  const std::string_view text = as_text(data, size);
  size_t begin = 0;
  for (size_t i = 0; i < n; ++i) {
    if (begin > text.size()) break;
    const size_t end = i + 1 == n ? std::string_view::npos : text.find('\0', begin);
    parts[i] = std::string(text.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  return parts;
}

// Logs would only slow the runs down.
inline void quiet() { set_log_level(LogLevel::Off); }

// Scratch files (the server's upload checks write each upload to one) in /dev/shm where it
// exists: nothing touches the disk.
inline void scratch_in_memory() {
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode)) ::setenv("TMPDIR", "/dev/shm", 1);
}

}  // namespace ltx::fuzz
