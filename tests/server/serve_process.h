#pragma once
// `ltx serve` as a child process for the tests: started on a free loopback port (--port-file) with
// its own data dir and demo cache, its stderr kept in a file, stopped by a signal or killed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "io/io_test_util.h"
#include "support/test_support.h"

namespace ltx::test {

// Polls `pred` every 20 ms until it holds or `timeout` passes; returns its last value.
inline bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

class ServeProcess {
 public:
  // `data_dir` and `cache_dir` persist across restarts of the same test; `extra` are more flags.
  ServeProcess(std::string data_dir, std::string cache_dir, std::string log_path,
               std::vector<std::string> extra = {})
      : data_dir_(std::move(data_dir)), cache_dir_(std::move(cache_dir)),
        log_path_(std::move(log_path)), extra_(std::move(extra)) {}
  ~ServeProcess() {
    if (pid_ > 0) kill9();
  }

  // Starts the server and waits until it answers /health (the demo bundle is written on the first
  // start, which takes a few seconds on a busy machine).
  void start() {
    const std::string port_file = data_dir_ + ".port";
    std::filesystem::remove(port_file);
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      dup2(fd, STDERR_FILENO);
      dup2(fd, STDOUT_FILENO);
      setenv("XDG_CACHE_HOME", cache_dir_.c_str(), 1);
      std::vector<std::string> args = {ltx_binary(), "serve", "--port", "0", "--port-file",
                                       port_file, "--data-dir", data_dir_};
      args.insert(args.end(), extra_.begin(), extra_.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    ASSERT_TRUE(wait_until(
        [&] {
          std::ifstream f(port_file);
          return static_cast<bool>(f >> port_) && port_ > 0;
        },
        std::chrono::seconds(60)))
        << "no port file; log:\n" << log();
    ASSERT_TRUE(wait_until([&] { return client().Get("/health") != nullptr; },
                           std::chrono::seconds(30)))
        << log();
  }

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(std::chrono::seconds(60));
    c.set_decompress(true);
    return c;
  }

  // SIGTERM, then the exit status (-1 when it did not exit normally within the timeout).
  int terminate(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    kill(pid_, SIGTERM);
    return wait_exit(timeout);
  }
  void kill9() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  int wait_exit(std::chrono::seconds timeout) {
    int status = 0;
    const bool exited = wait_until(
        [&] { return waitpid(pid_, &status, WNOHANG) == pid_; },
        std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    if (!exited) {
      kill9();
      return -1;
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // Resident set size of the server in KiB (VmRSS), 0 when unknown.
  int64_t rss_kib() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(f, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
    return 0;
  }
  std::string log() const { return read_bytes(log_path_); }
  pid_t pid() const { return pid_; }

 private:
  std::string data_dir_, cache_dir_, log_path_;
  std::vector<std::string> extra_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// POST /v1/videos with a JSON body: the Video it returns (a test failure unless 200).
inline nlohmann::json create_job(const ServeProcess& s, const nlohmann::json& body) {
  auto r = s.client().Post("/v1/videos", body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  return nlohmann::json::parse(r->body, nullptr, false);
}

// GET /v1/videos/{id}: the Video, or null when the server does not answer 200.
inline nlohmann::json get_job(const ServeProcess& s, const std::string& id) {
  auto r = s.client().Get("/v1/videos/" + id);
  if (!r || r->status != 200) return {};
  return nlohmann::json::parse(r->body, nullptr, false);
}

inline bool is_ended(const std::string& status) {
  return status == "completed" || status == "failed" || status == "cancelled";
}

// Waits (at most `timeout`) until the job ends; returns its last state.
inline nlohmann::json wait_done(const ServeProcess& s, const std::string& id,
                                std::chrono::milliseconds timeout) {
  nlohmann::json v;
  wait_until(
      [&] {
        v = get_job(s, id);
        return is_ended(v.value("status", ""));
      },
      timeout);
  return v;
}

}  // namespace ltx::test
