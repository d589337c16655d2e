#pragma once
// Runs the built `ltx` binary for CLI tests: arguments are shell-quoted, stdout and stderr are
// captured in files of a temporary directory, optional text is fed on stdin.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "support/test_support.h"

namespace ltx::test {

struct CliResult {
  int code = -1;  // exit status, -1 when the process did not exit normally
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) { return str("'", s, "'"); }

inline CliResult run_ltx(const TempDir& dir, const std::vector<std::string>& args,
                         const std::string* stdin_text = nullptr) {
  std::string cmd = shell_quote(ltx_binary());
  for (const auto& a : args) cmd += " " + shell_quote(a);
  const std::string out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  cmd += str(" >", shell_quote(out), " 2>", shell_quote(err));
  int status = -1;
  if (stdin_text == nullptr) {
    cmd += " </dev/null";
    status = std::system(cmd.c_str());
  } else {
    FILE* p = popen(cmd.c_str(), "w");
    if (p == nullptr) return {};
    if (!stdin_text->empty()) std::fwrite(stdin_text->data(), 1, stdin_text->size(), p);
    status = pclose(p);
  }
  CliResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  return r;
}

}  // namespace ltx::test
