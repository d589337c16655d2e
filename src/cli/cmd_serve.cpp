// `ltx serve [--host H] [--port P] [--port-file F]`: the video generation server
// (docs/design/server.md). SIGINT / SIGTERM stop it cleanly (exit 0).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"

#if LTX_WITH_SERVER
#include "server/http_server.h"
#endif

namespace ltx::cli {

namespace {

struct ServeCli {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string port_file;
};

#if LTX_WITH_SERVER
// A signal may land on any thread (OpenBLAS and the HTTP pool start their own), so the handler only
// writes a byte to a pipe; a watcher thread reads it and stops the server from ordinary code.
int g_signal_pipe[2] = {-1, -1};

void on_stop_signal(int signo) {
  const unsigned char b = static_cast<unsigned char>(signo);
  const int saved = errno;
  [[maybe_unused]] const ssize_t n = write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

class StopSignals {
 public:
  StopSignals() {
    LTX_CHECK(pipe2(g_signal_pipe, O_CLOEXEC) == 0, "cannot create the signal pipe");
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    close(g_signal_pipe[0]);
    close(g_signal_pipe[1]);
    g_signal_pipe[0] = g_signal_pipe[1] = -1;
  }
  // Blocks until a signal arrives or wake() is called; returns the signal number (0 for wake()).
  int wait() {
    unsigned char b = 0;
    while (read(g_signal_pipe[0], &b, 1) < 0 && errno == EINTR) {
    }
    return b;
  }
  void wake() { on_stop_signal(0); }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

void write_port_file(const std::string& path, int port) {
  // Written under a temporary name and renamed, so a reader never sees a partial number.
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  LTX_CHECK(f != nullptr, "--port-file ", path, ": cannot write ", tmp);
  std::fprintf(f, "%d\n", port);
  const bool ok = std::fclose(f) == 0;
  LTX_CHECK(ok && std::rename(tmp.c_str(), path.c_str()) == 0, "--port-file ", path,
            ": cannot write it");
}

int run_serve(const ServeCli& cli) {
  StopSignals signals;
  server::HttpServer http({cli.host, cli.port});
  server::add_health_route(http.routes());
  http.bind();
  if (!cli.port_file.empty()) write_port_file(cli.port_file, http.port());
  log_info("ltx serve: listening on http://", cli.host, ":", http.port());
  std::thread watcher([&] {
    const int signo = signals.wait();
    if (signo != 0) log_info("ltx serve: signal ", signo, ", stopping");
    http.stop();
  });
  http.serve();
  signals.wake();
  watcher.join();
  log_info("ltx serve: stopped");
  return 0;
}
#else
int run_serve(const ServeCli&) {
  throw Error(
      "this ltx was built without the server (cpp-httplib and SQLite were not found when it was "
      "configured); run scripts/install-deps and rebuild, or configure with -DLTX_SERVER=ON");
}
#endif

}  // namespace

Command add_serve(CLI::App& app) {
  auto cli = std::make_shared<ServeCli>();
  CLI::App* sub = app.add_subcommand("serve", "Serve video generation over HTTP (OpenAI video API)");
  sub->add_option("--host", cli->host, "Address to listen on (default 127.0.0.1: this machine only)");
  sub->add_option("--port", cli->port, "TCP port (default 8000; 0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--port-file", cli->port_file,
                  "Write the port listened on to this file once the server accepts connections");
  return {sub, [cli] { return run_serve(*cli); }};
}

}  // namespace ltx::cli
