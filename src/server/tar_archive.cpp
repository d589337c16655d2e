#include "server/tar_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "core/error.h"
#include "server/data_dir.h"

namespace ltx::server {

namespace {

namespace fs = std::filesystem;

struct ArchiveFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct ArchiveReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

// libarchive's last error on `a`, for messages.
std::string archive_message(archive* a) {
  const char* m = archive_error_string(a);
  return m != nullptr ? m : "unknown error";
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
    const fs::path p = it->path();
    const fs::file_status st = fs::symlink_status(p, ec);
    if (ec) break;
    const bool dir = fs::is_directory(st);
    LTX_CHECK(dir || fs::is_regular_file(st), "tar: '", p.string(),
              "' is not a plain file or folder; only those are archived");
    const std::string rel = fs::relative(p, folder).generic_string();
    entries.push_back({dir ? rel + "/" : rel, p, dir});
  }
  LTX_CHECK(!ec, "tar: cannot list '", folder, "': ", ec.message());
  // Byte order puts "a/" before "a/b" (a folder before what it holds).
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });

  const std::string tmp = tar_path + ".tmp";
  try {
    {
      // POSIX ustar through libarchive: what every tar reads; a name ustar cannot hold (over 100
      // bytes that no '/' splits into 155 + 100) is libarchive's error.
      std::unique_ptr<archive, ArchiveFree> a(archive_write_new());
      LTX_CHECK(a != nullptr, "tar: cannot start an archive (out of memory)");
      if (archive_write_set_format_ustar(a.get()) != ARCHIVE_OK ||
          archive_write_set_bytes_in_last_block(a.get(), 1) != ARCHIVE_OK ||
          archive_write_open_filename(a.get(), tmp.c_str()) != ARCHIVE_OK)
        fail("tar: cannot create '", tmp, "': ", archive_message(a.get()));
      std::vector<char> buf(1 << 16);
      for (const Entry& e : entries) {
        std::unique_ptr<archive_entry, EntryFree> h(archive_entry_new());
        const uint64_t size = e.folder ? 0 : static_cast<uint64_t>(fs::file_size(e.path, ec));
        LTX_CHECK(!ec, "tar: cannot read the size of '", e.path.string(), "': ", ec.message());
        archive_entry_set_pathname(h.get(), e.name.c_str());
        archive_entry_set_filetype(h.get(), e.folder ? AE_IFDIR : AE_IFREG);
        archive_entry_set_perm(h.get(), e.folder ? 0755 : 0644);
        archive_entry_set_size(h.get(), static_cast<la_int64_t>(size));
        archive_entry_set_mtime(h.get(), std::max<int64_t>(unix_mtime(e.path), 0), 0);
        if (archive_write_header(a.get(), h.get()) != ARCHIVE_OK)
          fail("tar: cannot add '", e.name, "': ", archive_message(a.get()));
        if (e.folder) continue;
        const int fd = ::open(e.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) fail("tar: cannot open '", e.path.string(), "': ", std::strerror(errno));
        uint64_t left = size;
        while (left > 0) {
          const ssize_t r = ::read(fd, buf.data(), std::min<uint64_t>(buf.size(), left));
          if (r < 0 && errno == EINTR) continue;
          if (r <= 0) {
            const int err = r < 0 ? errno : EIO;
            ::close(fd);
            fail("tar: cannot read '", e.path.string(), "': ",
                 r < 0 ? std::strerror(err) : "the file shrank while it was archived");
          }
          if (archive_write_data(a.get(), buf.data(), static_cast<size_t>(r)) != r) {
            ::close(fd);
            fail("tar: cannot write '", tmp, "': ", archive_message(a.get()));
          }
          left -= static_cast<uint64_t>(r);
        }
        ::close(fd);
      }
      if (archive_write_close(a.get()) != ARCHIVE_OK)
        fail("tar: cannot finish '", tmp, "': ", archive_message(a.get()));
    }
    // Durable before it replaces anything: the job's output must survive a crash once recorded.
    const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      fail("tar: cannot fsync '", tmp, "': ", std::strerror(err));
    }
    ::close(fd);
    if (::rename(tmp.c_str(), tar_path.c_str()) != 0)
      fail("tar: cannot rename '", tmp, "' to '", tar_path, "': ", std::strerror(errno));
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  const fs::path parent = fs::path(tar_path).parent_path();
  fsync_folder(parent.empty() ? "." : parent.string());
}


bool is_tar(std::string_view bytes) {
  return bytes.size() >= 512 && bytes.substr(257, 5) == "ustar";
}

std::vector<std::string> unpack_exr_tar(const std::string& bytes, const std::string& folder,
                                        int64_t max_frames, int64_t max_bytes,
                                        const ExrFrameCheck& check_frame) {
  std::unique_ptr<archive, ArchiveReadFree> a(archive_read_new());
  LTX_CHECK(a != nullptr, "tar: out of memory");
  if (archive_read_support_format_tar(a.get()) != ARCHIVE_OK ||
      archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK)
    fail("not a tar archive: ", archive_message(a.get()));
  std::vector<std::string> frames;
  int64_t total = 0;
  archive_entry* e = nullptr;
  for (;;) {
    const int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK) fail("a damaged tar archive: ", archive_message(a.get()));
    const char* raw = archive_entry_pathname(e);
    const std::string name = raw != nullptr ? raw : "";
    const mode_t type = archive_entry_filetype(e);
    if (type == AE_IFDIR) continue;
    LTX_CHECK(type == AE_IFREG, "entry '", name, "' is a link or special file; the archive must "
              "hold the EXR frames as plain files");
    const std::string base = fs::path(name).filename().string();
    if (base.empty() || base.front() == '.') continue;
    std::string lower = base;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    LTX_CHECK(lower.ends_with(".exr"), "entry '", name, "' is not an EXR frame (*.exr); the "
              "archive holds the frames only");
    LTX_CHECK(std::all_of(base.begin(), base.end(),
                          [](unsigned char c) {
                            return std::isalnum(c) != 0 || c == '.' || c == '_' || c == '-';
                          }),
              "entry '", name, "': frame names are letters, digits, '.', '_' and '-'");
    LTX_CHECK(std::find(frames.begin(), frames.end(), base) == frames.end(), "entry '", name,
              "': a frame named '", base, "' is in the archive twice");
    LTX_CHECK(static_cast<int64_t>(frames.size()) < max_frames, "the archive holds more than ",
              max_frames, " EXR frames");
    const int64_t size = archive_entry_size(e);
    LTX_CHECK(size >= 0 && total + size <= max_bytes, "the archive's frames take more than ",
              max_bytes, " bytes unpacked");
    total += size;
    std::string data(static_cast<size_t>(size), '\0');
    const la_ssize_t got = archive_read_data(a.get(), data.data(), data.size());
    LTX_CHECK(got == static_cast<la_ssize_t>(size), "entry '", name, "' is cut short: ",
              got < 0 ? archive_message(a.get()) : std::to_string(got) + " of " +
                                                       std::to_string(size) + " bytes");
    if (check_frame) check_frame(base, data);
    const fs::path out = fs::path(folder) / base;
    std::ofstream f(out, std::ios::binary | std::ios::trunc);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    LTX_CHECK(f.good(), "cannot write the frame '", out.string(), "'");
    frames.push_back(base);
  }
  LTX_CHECK(!frames.empty(), "the archive holds no EXR frame (*.exr)");
  std::sort(frames.begin(), frames.end());
  return frames;
}

}  // namespace ltx::server
