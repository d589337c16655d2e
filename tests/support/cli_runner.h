#pragma once
// Runs the built `ltx` binary for CLI tests: arguments are shell-quoted, stdout and stderr are
// captured in files of a temporary directory, optional text is fed on stdin.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
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

// `ltx generate ARGS` with the demo bundle in the test's own cache folder (XDG_CACHE_HOME under
// `dir`, so each test writes its own bundle).
inline CliResult run_generate(const TempDir& dir, std::vector<std::string> args) {
  setenv("XDG_CACHE_HOME", dir.file("cache").c_str(), 1);
  args.insert(args.begin(), "generate");
  return run_ltx(dir, args);
}

// One output line of an `ltx parity` report: "name max_abs rel_l2 max_rel".
struct ParityLine {
  double max_abs = -1, rel_l2 = -1, max_rel = -1;
};
// The line for `name`, or nullopt when the report has none (or it says "(no reference)").
inline std::optional<ParityLine> parity_line(const std::string& report, const std::string& name) {
  std::istringstream lines(report);
  std::string text;
  while (std::getline(lines, text)) {
    std::istringstream f(text);
    std::string n;
    ParityLine l;
    if ((f >> n >> l.max_abs >> l.rel_l2 >> l.max_rel) && n == name) return l;
  }
  return std::nullopt;
}
// The names of the report's output lines that start with `prefix`, in order.
inline std::vector<std::string> parity_names(const std::string& report, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream lines(report);
  std::string text;
  while (std::getline(lines, text))
    if (text.rfind(prefix, 0) == 0) out.push_back(text.substr(0, text.find(' ')));
  return out;
}

}  // namespace ltx::test
