// Faults during `ltx generate` (LTX_BINARY) end cleanly: a second SIGINT / SIGTERM ends the process
// at once, a full disk while the output is written is one error naming the file and the cause;
// neither leaves a file at the output path. (The first signal's clean stop: generate_test.cpp.)
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "generate/demo_bundle.h"
#include "io/io_test_util.h"
#include "media/support.h"
#include "support/cli_runner.h"
#include "support/file_size_limit.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// `ltx generate ARGS` as a child with its stderr on a pipe and the demo bundle in `cache`
// (XDG_CACHE_HOME); with `file_size_limit` > 0 its files may grow to that many bytes at most.
struct Child {
  pid_t pid = -1;
  int err = -1;  // read end of its stderr

  Child(const std::string& cache, const std::vector<std::string>& args, rlim_t file_size_limit = 0) {
    int p[2];
    if (pipe(p) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(p[1], STDERR_FILENO);
      close(p[0]);
      close(p[1]);
      setenv("XDG_CACHE_HOME", cache.c_str(), 1);
      if (file_size_limit > 0) test::FileSizeLimit::apply(file_size_limit);
      const std::string bin = test::ltx_binary();
      std::vector<char*> argv{const_cast<char*>(bin.c_str()), const_cast<char*>("generate")};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
    close(p[1]);
    err = p[0];
  }
  // Reads stderr until `text` appears (true) or the child closes it (false).
  bool wait_for(const std::string& text, std::string& log) const {
    char buf[4096];
    while (log.find(text) == std::string::npos) {
      const ssize_t n = read(err, buf, sizeof buf);
      if (n <= 0) return false;
      log.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  // Reads the rest of stderr and reaps the child; its wait status.
  int finish(std::string& log) {
    char buf[4096];
    for (ssize_t n; (n = read(err, buf, sizeof buf)) > 0;) log.append(buf, static_cast<size_t>(n));
    close(err);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  }
};

// The demo bundle in the child's cache folder, made here so that the child only generates.
std::string cache_with_demo_bundle(const TempDir& dir) {
  const std::string cache = dir.file("cache");
  generate::ensure_demo_bundle((fs::path(cache) / "ltx" / generate::kDemoBundleVersion).string());
  return cache;
}

// A second signal while the first one's stop is under way ends the process at once by that
// signal's default action, with nothing at the output path. SIGINT then SIGTERM: two different
// signals are never merged into one delivery (two SIGINTs sent back to back may be), and a step at
// this size outlasts the gap between the two kill() calls by orders of magnitude.
TEST(GenerateFaults, ASecondSignalEndsTheProcessAtOnce) {
  TempDir dir;
  const std::string cache = cache_with_demo_bundle(dir);
  const std::string out = dir.file("out/clip.mp4");
  Child child(cache, {"--prompt", "a red ball", "--output-path", out, "--pipeline", "one-stage",
                      "--num-frames", "17", "--height", "128", "--width", "256", "--num-inference-steps",
                      "200"});
  ASSERT_GT(child.pid, 0);
  std::string log;
  const bool started = child.wait_for("stage 1: step 1/", log);
  if (started) {
    ASSERT_EQ(kill(child.pid, SIGINT), 0);
    ASSERT_EQ(kill(child.pid, SIGTERM), 0);
  }
  const int status = child.finish(log);
  ASSERT_TRUE(started) << log;
  // Ended by the default action of whichever signal was handled second (the kernel may hand the
  // two to different threads in either order), not by the clean stop's exit(128 + signal).
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status) << "\n" << log;
  EXPECT_TRUE(WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM) << WTERMSIG(status) << "\n" << log;
  EXPECT_EQ(log.find("stage 1: step 200/200"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out));
}

// A full disk (RLIMIT_FSIZE in the child: writes past 512 bytes fail with EFBIG) while the MP4, the
// WAV or the PNG is written: exit 1, one error line naming the file and the cause, no file left.
TEST(GenerateFaults, AFullDiskWhileWritingTheOutputFailsCleanly) {
  TempDir dir;
  const std::string cache = cache_with_demo_bundle(dir);
  struct Case {
    std::string file;
    std::vector<std::string> args;
    bool needs_ffmpeg, needs_image_io;
  };
  const std::vector<std::string> video = {"--pipeline", "one-stage", "--height", "64", "--width", "128"};
  const auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  const std::vector<Case> cases = {
      {"clip.mp4", with(video, {"--num-frames", "9"}), true, false},
      {"rain.wav", {"--pipeline", "t2a", "--num-frames", "9"}, false, false},
      {"still.png", with(video, {"--num-frames", "1"}), false, true},
  };
  for (const Case& c : cases) {
    if ((c.needs_ffmpeg && !media::ffmpeg_available()) || (c.needs_image_io && !media::image_io_available()))
      continue;
    const std::string out_dir = dir.file("out_" + c.file);
    fs::create_directories(out_dir);
    const std::string out = out_dir + "/" + c.file;
    std::vector<std::string> args = {"--prompt", "a red ball", "--output-path", out, "--num-inference-steps", "1"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Child child(cache, args, 512);
    ASSERT_GT(child.pid, 0);
    std::string log;
    const int status = child.finish(log);
    ASSERT_TRUE(WIFEXITED(status)) << c.file << "\n" << log;
    EXPECT_EQ(WEXITSTATUS(status), 1) << c.file << "\n" << log;
    std::string last = log;
    while (!last.empty() && last.back() == '\n') last.pop_back();
    last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
    EXPECT_EQ(last.rfind("ltx: error: ", 0), 0u) << c.file << "\n" << log;
    EXPECT_NE(last.find(out), std::string::npos) << c.file << "\n" << log;
    EXPECT_NE(last.find("File too large"), std::string::npos) << c.file << "\n" << log;
    EXPECT_TRUE(fs::is_empty(out_dir)) << c.file << ": left in the output folder\n" << log;
  }
}

}  // namespace
}  // namespace ltx
