#pragma once
// A loopback mock of the Hugging Face hub for the download tests: the hub's resolve URL
// (/{repo}/resolve/{rev}/{path}: small files served directly with their Git blob SHA-1 as ETag;
// large ("LFS") files answered with a 302 to a second server, the CDN, with X-Linked-Etag (their
// SHA-256), X-Linked-Size and X-Repo-Commit), the model-info API listing a repository, 401 for a
// gated repository without the right Bearer token, and on the CDN Range GETs that can drop the
// connection or stall part-way (until released) once. Every request is recorded. Also: a child
// process runner for the `ltx` binary with its own environment.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "io/io_test_util.h"
#include "support/loopback_http.h"
#include "support/test_support.h"

namespace ltx::test {

inline std::string hex_digest(const std::string& bytes, const EVP_MD* md, const std::string& prefix = "") {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, md, nullptr);
  EVP_DigestUpdate(ctx, prefix.data(), prefix.size());
  EVP_DigestUpdate(ctx, bytes.data(), bytes.size());
  EVP_DigestFinal_ex(ctx, out, &n);
  EVP_MD_CTX_free(ctx);
  std::string h;
  for (unsigned int i = 0; i < n; ++i) {
    static const char* d = "0123456789abcdef";
    h += d[out[i] >> 4];
    h += d[out[i] & 15];
  }
  return h;
}
inline std::string sha256_hex(const std::string& bytes) { return hex_digest(bytes, EVP_sha256()); }
inline std::string git_blob_sha1(const std::string& bytes) {
  return hex_digest(bytes, EVP_sha1(), "blob " + std::to_string(bytes.size()) + std::string(1, '\0'));
}

// Deterministic bytes that differ at every offset class (a misplaced range shows).
inline std::string pattern_bytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s[i] = static_cast<char>(x);
  }
  return s;
}

class MockHub {
 public:
  struct File {
    std::string content;
    bool lfs = true;                 // served through the CDN
    std::string etag_override;       // served instead of the true digest (a corrupt mirror)
    int64_t drop_at = -1;            // the CDN closes the connection after this offset, once
    int64_t stall_at = -1;           // the CDN stops sending at this offset until release(), once
  };
  struct Seen {
    std::string method, path, range;
    bool authorization = false;
    std::string server;  // "hub" or "cdn"
  };

  MockHub() {
    hub_.Get(R"(/api/models/([^/]+/[^/]+)/revision/([^/?]+))",
             [this](const httplib::Request& req, httplib::Response& res) { list(req, res); });
    hub_.Get(R"(/([^/]+/[^/]+)/resolve/([^/]+)/(.+))",
             [this](const httplib::Request& req, httplib::Response& res) { resolve(req, res); });
    cdn_.Get(R"(/blob/([^/]+/[^/]+)/(.+))",
             [this](const httplib::Request& req, httplib::Response& res) { blob(req, res); });
    hub_port_ = hub_.bind_to_any_port("127.0.0.1");
    cdn_port_ = cdn_.bind_to_any_port("127.0.0.1");
    hub_thread_ = std::thread([this] { hub_.listen_after_bind(); });
    cdn_thread_ = std::thread([this] { cdn_.listen_after_bind(); });
    wait_until_listening(hub_);
    wait_until_listening(cdn_);
  }
  ~MockHub() {
    release();
    hub_.stop();
    cdn_.stop();
    hub_thread_.join();
    cdn_thread_.join();
  }
  MockHub(const MockHub&) = delete;
  MockHub& operator=(const MockHub&) = delete;

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(hub_port_); }

  void add(const std::string& repo, const std::string& path, File f) {
    std::lock_guard<std::mutex> g(mu_);
    files_[repo][path] = std::move(f);
  }
  // Requests to the repository need "Authorization: Bearer <token>".
  void gate(const std::string& repo, const std::string& token) {
    std::lock_guard<std::mutex> g(mu_);
    gated_[repo] = token;
  }

  std::vector<Seen> seen() {
    std::lock_guard<std::mutex> g(mu_);
    return seen_;
  }
  // Bytes the CDN sent of a file, over all requests.
  int64_t cdn_bytes(const std::string& path) {
    std::lock_guard<std::mutex> g(mu_);
    return sent_[path];
  }
  // Waits (bounded) until a transfer stalls; true when one did.
  bool wait_stalled(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    std::unique_lock<std::mutex> g(mu_);
    return cv_.wait_for(g, timeout, [&] { return stalled_; });
  }
  void release() {
    std::lock_guard<std::mutex> g(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  void record(const httplib::Request& req, const std::string& server) {
    std::lock_guard<std::mutex> g(mu_);
    seen_.push_back({req.method, req.path, req.get_header_value("Range"),
                     req.has_header("Authorization"), server});
  }

  // 401 unless the repository is open or the request carries its token.
  bool refuse(const httplib::Request& req, httplib::Response& res, const std::string& repo) {
    std::lock_guard<std::mutex> g(mu_);
    const auto it = gated_.find(repo);
    if (it == gated_.end() || req.get_header_value("Authorization") == "Bearer " + it->second) return false;
    res.status = 401;
    res.set_header("X-Error-Code", "GatedRepo");
    res.set_header("X-Error-Message", "Access to model " + repo + " is restricted.");
    return true;
  }

  void list(const httplib::Request& req, httplib::Response& res) {
    record(req, "hub");
    const std::string repo = req.matches[1];
    if (refuse(req, res, repo)) return;
    std::lock_guard<std::mutex> g(mu_);
    nlohmann::json siblings = nlohmann::json::array();
    for (const auto& [path, f] : files_[repo])
      siblings.push_back({{"rfilename", path}, {"size", f.content.size()}});
    res.set_content(nlohmann::json{{"id", repo}, {"sha", kCommit}, {"siblings", siblings}}.dump(),
                     "application/json");
  }

  void resolve(const httplib::Request& req, httplib::Response& res) {
    record(req, "hub");
    const std::string repo = req.matches[1], path = req.matches[3];
    if (refuse(req, res, repo)) return;
    std::lock_guard<std::mutex> g(mu_);
    const auto r = files_.find(repo);
    if (r == files_.end() || !r->second.count(path)) {
      res.status = 404;
      res.set_header("X-Error-Code", r == files_.end() ? "RepoNotFound" : "EntryNotFound");
      return;
    }
    const File& f = r->second.at(path);
    res.set_header("X-Repo-Commit", kCommit);
    if (!f.lfs) {
      res.set_header("ETag", "\"" + (f.etag_override.empty() ? git_blob_sha1(f.content) : f.etag_override) + "\"");
      const std::string body = f.content;
      res.set_content_provider(body.size(), "application/octet-stream",
                               [body](size_t off, size_t len, httplib::DataSink& sink) {
                                 sink.write(body.data() + off, len);
                                 return true;
                               });
      return;
    }
    res.status = 302;
    res.set_header("Location", "http://127.0.0.1:" + std::to_string(cdn_port_) + "/blob/" + repo + "/" + path);
    res.set_header("X-Linked-Etag", "\"" + (f.etag_override.empty() ? sha256_hex(f.content) : f.etag_override) + "\"");
    res.set_header("X-Linked-Size", std::to_string(f.content.size()));
  }

  void blob(const httplib::Request& req, httplib::Response& res) {
    record(req, "cdn");
    const std::string repo = req.matches[1], path = req.matches[2];
    std::string content;
    int64_t drop = -1, stall = -1;
    {
      std::lock_guard<std::mutex> g(mu_);
      File& f = files_[repo][path];
      content = f.content;
      std::swap(drop, f.drop_at);  // once
      std::swap(stall, f.stall_at);
    }
    res.set_content_provider(
        content.size(), "application/octet-stream",
        [this, content, drop, stall, path](size_t off, size_t len, httplib::DataSink& sink) {
          size_t pos = off;
          const size_t end = off + len;
          while (pos < end) {
            if (drop >= 0 && static_cast<int64_t>(pos) >= drop) return false;  // connection closed
            if (stall >= 0 && static_cast<int64_t>(pos) >= stall) {
              std::unique_lock<std::mutex> g(mu_);
              stalled_ = true;
              cv_.notify_all();
              cv_.wait(g, [&] { return released_; });
              if (!sink.is_writable()) return false;
            }
            size_t n = std::min<size_t>(16384, end - pos);
            if (drop >= 0) n = std::min<size_t>(n, static_cast<size_t>(std::max<int64_t>(drop - static_cast<int64_t>(pos), 1)));
            if (stall >= 0 && static_cast<int64_t>(pos) < stall)
              n = std::min<size_t>(n, static_cast<size_t>(stall - static_cast<int64_t>(pos)));
            if (!sink.write(content.data() + pos, n)) return false;
            {
              std::lock_guard<std::mutex> g(mu_);
              sent_[path] += static_cast<int64_t>(n);
            }
            pos += n;
          }
          return true;
        });
  }

  static constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";
  httplib::Server hub_, cdn_;
  int hub_port_ = 0, cdn_port_ = 0;
  std::thread hub_thread_, cdn_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stalled_ = false, released_ = false;
  std::map<std::string, std::map<std::string, File>> files_;
  std::map<std::string, std::string> gated_;
  std::map<std::string, int64_t> sent_;
  std::vector<Seen> seen_;
};

// `ltx ARGS` as a child process with the test's environment: HF_ENDPOINT at the mock, every cache
// and home under `dir`, no token unless given; its stdout and stderr in files.
class LtxProcess {
 public:
  LtxProcess(const TempDir& dir, std::string name, const std::string& endpoint,
             std::map<std::string, std::string> env_overrides = {})
      : out_(dir.file(name + ".out")), err_(dir.file(name + ".err")) {
    env_ = {{"HF_ENDPOINT", endpoint},
            {"XDG_CACHE_HOME", dir.file("xdg-cache")},
            {"HF_HOME", dir.file("hf-home")},
            {"HOME", dir.file("home")},
            {"PATH", "/usr/bin:/bin"}};
    for (auto& [k, v] : env_overrides) env_[k] = v;
  }
  ~LtxProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  LtxProcess(const LtxProcess&) = delete;
  LtxProcess& operator=(const LtxProcess&) = delete;

  // Starts `ltx args`; max_file_bytes >= 0 caps the size of any file it writes (RLIMIT_FSIZE,
  // SIGXFSZ ignored so the write fails with EFBIG as on a full disk).
  void start(const std::vector<std::string>& args, int64_t max_file_bytes = -1) {
    std::vector<std::string> argv_s = {ltx_binary()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<std::string> env_s;
    for (const auto& [k, v] : env_) env_s.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      const int in = ::open("/dev/null", O_RDONLY);
      const int out = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int err = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(in, STDIN_FILENO);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
      if (max_file_bytes >= 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl {static_cast<rlim_t>(max_file_bytes), static_cast<rlim_t>(max_file_bytes)};
        ::setrlimit(RLIMIT_FSIZE, &rl);
      }
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
  }
  // The exit status (-signal when killed by one).
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  int run(const std::vector<std::string>& args, int64_t max_file_bytes = -1) {
    start(args, max_file_bytes);
    return wait();
  }
  void signal(int sig) { ::kill(pid_, sig); }
  std::string out() const { return read_bytes(out_); }
  std::string err() const { return read_bytes(err_); }

 private:
  std::string out_, err_;
  std::map<std::string, std::string> env_;
  pid_t pid_ = -1;
};

// Polls `pred` every 20 ms until it holds or `timeout` passes; returns its last value.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace ltx::test
