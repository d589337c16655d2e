#pragma once
// A full disk without a full disk: while a FileSizeLimit lives, no file this process writes may
// grow past `bytes` (RLIMIT_FSIZE) and SIGXFSZ is ignored, so a write past it fails with EFBIG as
// a write to a full disk fails with ENOSPC. Both are put back when it ends. For a child process,
// apply() between fork and exec (an ignored signal stays ignored across exec).
#include <signal.h>
#include <sys/resource.h>

namespace ltx::test {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_limit_);
    saved_signal_ = signal(SIGXFSZ, SIG_IGN);
    rlimit r = saved_limit_;
    r.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_limit_);
    signal(SIGXFSZ, saved_signal_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

  // In a forked child before exec: the limit for the rest of its life.
  static void apply(rlim_t bytes) {
    signal(SIGXFSZ, SIG_IGN);
    rlimit r{};
    getrlimit(RLIMIT_FSIZE, &r);
    r.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &r);
  }

 private:
  rlimit saved_limit_{};
  sighandler_t saved_signal_ = SIG_DFL;
};

}  // namespace ltx::test
