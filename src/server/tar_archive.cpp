#include "server/tar_archive.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "server/data_dir.h"

namespace ltx::server {

namespace {

namespace fs = std::filesystem;
constexpr size_t kTarBlock = 512;

// A number as `width - 1` octal digits and a NUL, as ustar stores sizes, times and modes.
void put_octal(char* field, size_t width, uint64_t value, const std::string& who) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(width - 1),
                static_cast<unsigned long long>(value));
  LTX_CHECK(std::strlen(buf) == width - 1, "tar: ", who, ": the value ", value, " does not fit ustar's ",
            width - 1, "-digit field");
  std::memcpy(field, buf, width);
}

// A ustar header for `name` (a folder when `folder`). Long names are split at a '/' into the
// prefix (155 bytes) and the name (100 bytes).
std::array<char, kTarBlock> tar_header(const std::string& name, bool folder, uint64_t size, int64_t mtime) {
  std::array<char, kTarBlock> h{};
  std::string prefix, rest = name;
  if (rest.size() > 100) {
    // The last '/' that leaves at most 100 bytes after it and at most 155 before.
    size_t cut = std::string::npos;
    for (size_t i = 0; i < name.size(); ++i)
      if (name[i] == '/' && i <= 155 && name.size() - i - 1 <= 100 && name.size() - i - 1 > 0) cut = i;
    LTX_CHECK(cut != std::string::npos, "tar: the name '", name, "' is too long for ustar (",
              name.size(), " bytes)");
    prefix = name.substr(0, cut);
    rest = name.substr(cut + 1);
  }
  std::memcpy(h.data(), rest.data(), rest.size());
  put_octal(h.data() + 100, 8, folder ? 0755 : 0644, name);
  put_octal(h.data() + 108, 8, 0, name);  // uid
  put_octal(h.data() + 116, 8, 0, name);  // gid
  put_octal(h.data() + 124, 12, size, name);
  put_octal(h.data() + 136, 12, static_cast<uint64_t>(std::max<int64_t>(mtime, 0)), name);
  h[156] = folder ? '5' : '0';
  std::memcpy(h.data() + 257, "ustar", 6);  // magic with its NUL
  std::memcpy(h.data() + 263, "00", 2);     // version
  std::memcpy(h.data() + 345, prefix.data(), prefix.size());
  // The checksum: the header's bytes summed with its own field read as spaces.
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (char c : h) sum += static_cast<unsigned char>(c);
  std::snprintf(h.data() + 148, 8, "%06o", sum);  // six digits, NUL, and the space kept
  h[155] = ' ';
  return h;
}

class TarOut {
 public:
  explicit TarOut(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("tar: cannot create '", path_, "': ", std::strerror(errno));
  }
  ~TarOut() {
    if (fd_ >= 0) ::close(fd_);
  }
  TarOut(const TarOut&) = delete;
  TarOut& operator=(const TarOut&) = delete;

  void write(const char* data, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, data, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("tar: cannot write '", path_, "': ", std::strerror(errno));
      data += w;
      n -= static_cast<size_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
  }
  // Zeros up to the next 512-byte boundary.
  void pad() {
    static const std::array<char, kTarBlock> zeros{};
    if (const size_t r = written_ % kTarBlock; r != 0) write(zeros.data(), kTarBlock - r);
  }
  void close_synced() {
    if (::fsync(fd_) != 0) fail("tar: cannot fsync '", path_, "': ", std::strerror(errno));
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("tar: cannot close '", path_, "': ", std::strerror(errno));
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

void append_file(TarOut& out, const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("tar: cannot open '", file.string(), "': ", std::strerror(errno));
  std::vector<char> buf(1 << 16);
  for (;;) {
    const ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int err = errno;
      ::close(fd);
      fail("tar: cannot read '", file.string(), "': ", std::strerror(err));
    }
    if (r == 0) break;
    out.write(buf.data(), static_cast<size_t>(r));
  }
  ::close(fd);
  out.pad();
}

int64_t unix_mtime(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtime) : 0;
}

}  // namespace

void write_tar(const std::string& folder, const std::string& tar_path) {
  std::error_code ec;
  LTX_CHECK(fs::is_directory(folder, ec), "tar: '", folder, "' is not a folder");
  struct Entry {
    std::string name;
    fs::path path;
    bool folder = false;
  };
  std::vector<Entry> entries;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string rel = fs::relative(p, folder).generic_string();
    if (it->is_symlink(ec) || !(it->is_regular_file(ec) || it->is_directory(ec)))
      fail("tar: '", p.string(), "' is not a plain file or folder");
    const bool dir = it->is_directory(ec);
    entries.push_back({dir ? rel + "/" : rel, p, dir});
  }
  LTX_CHECK(!ec, "tar: cannot list '", folder, "': ", ec.message());
  // Byte order puts "a/" before "a/b" (a folder before what it holds).
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });

  const std::string tmp = tar_path + ".tmp";
  try {
    TarOut out(tmp);
    for (const Entry& e : entries) {
      const uint64_t size = e.folder ? 0 : static_cast<uint64_t>(fs::file_size(e.path, ec));
      LTX_CHECK(!ec, "tar: cannot read the size of '", e.path.string(), "': ", ec.message());
      const auto h = tar_header(e.name, e.folder, size, unix_mtime(e.path));
      out.write(h.data(), h.size());
      if (!e.folder) append_file(out, e.path);
    }
    // The end: two zero blocks.
    const std::array<char, 2 * kTarBlock> end{};
    out.write(end.data(), end.size());
    out.close_synced();
    if (::rename(tmp.c_str(), tar_path.c_str()) != 0)
      fail("tar: cannot rename '", tmp, "' to '", tar_path, "': ", std::strerror(errno));
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  const fs::path parent = fs::path(tar_path).parent_path();
  fsync_folder(parent.empty() ? "." : parent.string());
}

}  // namespace ltx::server
