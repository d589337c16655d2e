#include "io/atomic_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace ltx::io {

AtomicFile::AtomicFile(std::string path, std::string what)
    : path_(std::move(path)), temp_(path_ + ".tmp"), what_(std::move(what)) {
  f_ = std::fopen(temp_.c_str(), "wb");
  if (f_ == nullptr) fail(what_, ": cannot create '", temp_, "': ", std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) std::fclose(f_);
  if (!committed_) std::remove(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  LTX_CHECK(f_ != nullptr, what_, ": '", temp_, "' is already closed");
  if (n > 0 && std::fwrite(data, 1, n, f_) != n)
    fail(what_, ": writing '", temp_, "' failed: ", std::strerror(errno));
  written_ += n;
}

void AtomicFile::write_zeros(size_t n) {
  static const std::vector<char> zeros(4096, 0);
  while (n > 0) {
    const size_t k = std::min(n, zeros.size());
    write(zeros.data(), k);
    n -= k;
  }
}

void AtomicFile::commit() {
  LTX_CHECK(f_ != nullptr, what_, ": '", temp_, "' is already closed");
  if (std::fflush(f_) != 0 || fsync(fileno(f_)) != 0)
    fail(what_, ": flushing '", temp_, "' failed: ", std::strerror(errno));
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) fail(what_, ": closing '", temp_, "' failed: ", std::strerror(errno));
  if (std::rename(temp_.c_str(), path_.c_str()) != 0)
    fail(what_, ": cannot rename '", temp_, "' to '", path_, "': ", std::strerror(errno));
  committed_ = true;
}

}  // namespace ltx::io
