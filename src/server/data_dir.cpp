#include "server/data_dir.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "core/error.h"
#include "core/log.h"
#include "server/job.h"

namespace fs = std::filesystem;

namespace ltx::server {
namespace {

constexpr const char* kDbName = "ltx-serve.db";
constexpr const char* kLockName = "lock";
constexpr const char* kOutputs = "outputs";
constexpr const char* kInputs = "inputs";
constexpr std::string_view kTmp = ".tmp";

std::string hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[p[i] >> 4];
    s[2 * i + 1] = kDigits[p[i] & 0xF];
  }
  return s;
}

std::string random_hex(size_t bytes) {
  unsigned char buf[64];
  LTX_CHECK(bytes <= sizeof(buf), "random_hex: at most ", sizeof(buf), " bytes");
  size_t got = 0;
  while (got < bytes) {
    const ssize_t r = getrandom(buf + got, bytes - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("cannot read the system's random source (getrandom: ", std::strerror(errno), ")");
    }
    got += static_cast<size_t>(r);
  }
  return hex(buf, bytes);
}

// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

void write_all(int fd, std::string_view bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("cannot write '", path, "': ", std::strerror(errno));
    }
    done += static_cast<size_t>(w);
  }
}

// Writes a new file (it must not exist) and fsyncs it.
void write_new_file(const std::string& path, std::string_view bytes) {
  Fd f(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (f.fd < 0) fail("cannot create '", path, "': ", std::strerror(errno));
  write_all(f.fd, bytes, path);
  if (::fsync(f.fd) != 0) fail("cannot fsync '", path, "': ", std::strerror(errno));
}

// The folder must exist as a folder or be creatable; `what` names it in errors.
void ensure_folder(const fs::path& p, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (fs::exists(st)) {
    LTX_CHECK(fs::is_directory(st), what, " '", p.string(),
              "' is a file, not a folder; remove it or choose another --data-dir");
    return;
  }
  fs::create_directories(p, ec);
  if (ec)
    fail("cannot create ", what, " '", p.string(), "': ", ec.message(),
         "; choose a writable --data-dir");
  fs::permissions(p, fs::perms::owner_all, fs::perm_options::replace, ec);
}

void check_id(const std::string& id) {
  LTX_CHECK(is_job_id(id), "data dir: '", id, "' is not a job id (video_ + 32 hex digits)");
}

bool is_input_ext(const std::string& ext) {
  if (ext.empty() || ext.size() > 12) return false;  // "safetensors" the longest in use
  return std::all_of(ext.begin(), ext.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); });
}

// "<n>.<ext>" as store_inputs names them.
bool is_input_file_name(const std::string& file) {
  const size_t dot = file.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 3) return false;
  for (size_t i = 0; i < dot; ++i)
    if (file[i] < '0' || file[i] > '9') return false;
  return is_input_ext(file.substr(dot + 1));
}

void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  // A file that stays is found again by the next start's orphan sweep.
  if (ec) log_warn("data dir: cannot remove '", p.string(), "': ", ec.message());
}

int64_t bytes_under(const fs::path& dir) {
  int64_t total = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  // Files may come and go while a worker runs: whatever cannot be read counts as 0.
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fec;
    if (it->is_regular_file(fec)) {
      const auto n = it->file_size(fec);
      if (!fec) total += static_cast<int64_t>(n);
    }
  }
  return total;
}

}  // namespace

std::string new_job_id() { return "video_" + random_hex(16); }
std::string new_token() { return random_hex(32); }

namespace {
struct DigestCtx {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~DigestCtx() { EVP_MD_CTX_free(ctx); }
};
}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  LTX_CHECK(EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr) == 1,
            "sha256: OpenSSL's EVP_Digest failed");
  return hex(md, n);
}

std::string sha256_hex_of_file(const std::string& path) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) fail("cannot open '", path, "' to hash it: ", std::strerror(errno));
  DigestCtx d;
  LTX_CHECK(d.ctx != nullptr && EVP_DigestInit_ex(d.ctx, EVP_sha256(), nullptr) == 1,
            "sha256: OpenSSL's digest context failed");
  std::unique_ptr<char[]> buf(new char[1 << 16]);
  for (;;) {
    const ssize_t r = ::read(f.fd, buf.get(), 1 << 16);
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("cannot read '", path, "' to hash it: ", std::strerror(errno));
    }
    if (r == 0) break;
    LTX_CHECK(EVP_DigestUpdate(d.ctx, buf.get(), static_cast<size_t>(r)) == 1,
              "sha256: OpenSSL's EVP_DigestUpdate failed");
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  LTX_CHECK(EVP_DigestFinal_ex(d.ctx, md, &n) == 1, "sha256: OpenSSL's EVP_DigestFinal failed");
  return hex(md, n);
}

void fsync_file(const std::string& path) {
  Fd f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) fail("cannot open '", path, "' to fsync it: ", std::strerror(errno));
  if (::fsync(f.fd) != 0) fail("cannot fsync '", path, "': ", std::strerror(errno));
}

void fsync_folder(const std::string& path) {
  Fd f(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (f.fd < 0) fail("cannot open the folder '", path, "' to fsync it: ", std::strerror(errno));
  if (::fsync(f.fd) != 0) fail("cannot fsync the folder '", path, "': ", std::strerror(errno));
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + std::string(kTmp);
  ::unlink(tmp.c_str());  // a leftover of an interrupted write
  try {
    write_new_file(tmp, bytes);
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail("cannot rename '", tmp, "' to '", path, "': ", std::strerror(errno));
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  const fs::path parent = fs::path(path).parent_path();
  fsync_folder(parent.empty() ? "." : parent.string());
}

DataDir::DataDir(std::string root) {
  LTX_CHECK(!root.empty(), "--data-dir is empty; give a folder for the job store and the outputs");
  root_ = fs::absolute(fs::path(root)).lexically_normal().string();
  if (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  ensure_folder(root_, "the data dir (--data-dir)");
  LTX_CHECK(::access(root_.c_str(), W_OK | X_OK) == 0,
            "no permission to create files in the data dir '", root_, "' (", std::strerror(errno),
            "); choose a writable --data-dir");

  const std::string lock = root_ + "/" + kLockName;
  lock_fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0)
    fail("cannot open the lock file '", lock, "' of the data dir: ", std::strerror(errno),
         "; choose a writable --data-dir");
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(lock_fd_, buf, sizeof(buf) - 1, 0);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    pid.erase(std::remove_if(pid.begin(), pid.end(), [](char c) { return c < '0' || c > '9'; }),
              pid.end());
    ::close(lock_fd_);
    lock_fd_ = -1;
    if (err == EWOULDBLOCK)
      fail("the data dir '", root_, "' is in use by another ltx serve (",
           pid.empty() ? std::string("pid unknown") : "pid " + pid,
           "): one server per data dir; stop that one or choose another --data-dir");
    fail("cannot lock '", lock, "': ", std::strerror(err));
  }
  // The holder's pid, for the error a second server gets.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0)
    log_warn("data dir: cannot record the pid in '", lock, "': ", std::strerror(errno));

  try {
    ensure_folder(outputs_dir(), "the outputs folder");
    ensure_folder(inputs_dir(), "the inputs folder");
  } catch (...) {
    ::close(lock_fd_);
    lock_fd_ = -1;
    throw;
  }
}

DataDir::~DataDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // closing releases the flock
}

std::string DataDir::db_path() const { return root_ + "/" + kDbName; }
std::string DataDir::outputs_dir() const { return root_ + "/" + kOutputs; }
std::string DataDir::inputs_dir() const { return root_ + "/" + kInputs; }

namespace {
constexpr const char* kOutputExts[] = {"mp4", "wav", "png", "tar"};
}

std::string DataDir::output_path(const std::string& id, const std::string& ext) const {
  check_id(id);
  LTX_CHECK(std::find(std::begin(kOutputExts), std::end(kOutputExts), ext) != std::end(kOutputExts),
            "data dir: '", ext, "' is not an output format (mp4, wav, png or tar)");
  return outputs_dir() + "/" + id + "." + ext;
}

std::string DataDir::parts_path(const std::string& id) const {
  check_id(id);
  return outputs_dir() + "/" + id + ".parts" + std::string(kTmp);
}

std::string DataDir::output_file_path(const std::string& id, const std::string& file) const {
  for (const char* ext : kOutputExts)
    if (file == id + "." + ext) return output_path(id, ext);
  fail("data dir: '", file, "' is not an output name of job ", id);
}

std::string DataDir::thumbnail_path(const std::string& id) const {
  check_id(id);
  return outputs_dir() + "/" + id + ".png";
}

std::string DataDir::inputs_path(const std::string& id) const {
  check_id(id);
  return inputs_dir() + "/" + id;
}

std::string DataDir::input_path(const std::string& id, const std::string& file) const {
  LTX_CHECK(is_input_file_name(file), "data dir: '", file,
            "' is not an input file name (<n>.<ext>)");
  return inputs_path(id) + "/" + file;
}

std::vector<std::string> DataDir::store_inputs(const std::string& id,
                                               const std::vector<InputImage>& images) const {
  const std::string final_dir = inputs_path(id);
  if (images.empty()) return {};
  LTX_CHECK(images.size() <= 999, "data dir: ", images.size(),
            " input images for one job (at most 999)");
  for (const auto& im : images)
    LTX_CHECK(is_input_ext(im.ext), "data dir: '", im.ext,
              "' is not an input file extension (1-12 lowercase letters or digits)");
  const std::string tmp = final_dir + std::string(kTmp);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (::mkdir(tmp.c_str(), 0700) != 0)
    fail("cannot create the folder '", tmp, "': ", std::strerror(errno));
  std::vector<std::string> names;
  try {
    for (size_t i = 0; i < images.size(); ++i) {
      names.push_back(std::to_string(i) + "." + images[i].ext);
      write_new_file(tmp + "/" + names.back(), images[i].bytes);
    }
    fsync_folder(tmp);
    if (::rename(tmp.c_str(), final_dir.c_str()) != 0)
      fail("cannot rename '", tmp, "' to '", final_dir, "': ", std::strerror(errno));
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fsync_folder(inputs_dir());
  return names;
}

void DataDir::remove_job_outputs(const std::string& id) const {
  for (const std::string& p :
       {output_path(id), output_path(id, "wav"), output_path(id, "tar"), thumbnail_path(id)}) {
    remove_quietly(p);
    remove_quietly(p + std::string(kTmp));
  }
  remove_quietly(parts_path(id));
}

void DataDir::remove_job_inputs(const std::string& id) const {
  const std::string dir = inputs_path(id);
  remove_quietly(dir);
  remove_quietly(dir + std::string(kTmp));
}

void DataDir::remove_job_files(const std::string& id) const {
  remove_job_outputs(id);
  remove_job_inputs(id);
}

void DataDir::sync_output(const std::string& id, const std::string& ext) const {
  const std::string path = output_path(id, ext);
  std::error_code ec;
  LTX_CHECK(fs::is_regular_file(path, ec), "job ", id, ": its output '", path, "' is missing");
  fsync_file(path);
  fsync_folder(outputs_dir());
}

DirListing DataDir::listing() const {
  DirListing out;
  std::error_code ec;
  for (fs::directory_iterator it(outputs_dir(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.ends_with(kTmp)) {
      out.temporaries.push_back(it->path().string());
      continue;
    }
    const fs::path p(name);
    const std::string stem = p.stem().string(), ext = p.extension().string();
    if ((ext == ".mp4" || ext == ".wav" || ext == ".png" || ext == ".tar") && is_job_id(stem) &&
        std::find(out.output_ids.begin(), out.output_ids.end(), stem) == out.output_ids.end())
      out.output_ids.push_back(stem);
  }
  LTX_CHECK(!ec, "cannot list '", outputs_dir(), "': ", ec.message());
  for (fs::directory_iterator it(inputs_dir(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.ends_with(kTmp))
      out.temporaries.push_back(it->path().string());
    else if (is_job_id(name))
      out.input_ids.push_back(name);
  }
  LTX_CHECK(!ec, "cannot list '", inputs_dir(), "': ", ec.message());
  return out;
}

int DataDir::remove_temporaries() const {
  int n = 0;
  for (const auto& p : listing().temporaries) {
    remove_quietly(p);
    ++n;
  }
  return n;
}

DiskUsage DataDir::disk_usage() const {
  DiskUsage u{bytes_under(outputs_dir()), bytes_under(inputs_dir())};
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    const auto n = fs::file_size(db_path() + suffix, ec);
    if (!ec) u.database_bytes += static_cast<int64_t>(n);
  }
  return u;
}

}  // namespace ltx::server
