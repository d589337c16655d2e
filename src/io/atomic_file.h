#pragma once
// Writing a file so that a failure never leaves a partial one at its path: the bytes go to
// `path + ".tmp"`, which commit() flushes, syncs and renames over `path`; an AtomicFile destroyed
// before commit() (an exception, a full disk) removes the temporary. Every I/O error throws an
// ltx::Error naming the file and strerror (a full disk says "No space left on device").
#include <cstdint>
#include <cstdio>
#include <string>

namespace ltx::io {

class AtomicFile {
 public:
  // Creates (truncates) `path + ".tmp"`; `what` starts the error messages ("write_gguf").
  AtomicFile(std::string path, std::string what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  // `n` zero bytes.
  void write_zeros(size_t n);
  uint64_t bytes_written() const { return written_; }
  // Flushes, fsyncs and renames the temporary over the final path.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_;
  std::string temp_;
  std::string what_;
  std::FILE* f_ = nullptr;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace ltx::io
