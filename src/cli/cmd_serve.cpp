// `ltx serve [model flags of generate] [--device cuda] [--host H] [--port P] [--api-key KEY]
// [--data-dir DIR] [--max-queue N] [--max-batch N] ...`: the video generation server
// (docs/SERVER.md): the OpenAI / SGLang video API over resident models, a job store that survives
// crashes, a web page. Without model files it serves the built-in demo bundle (random weights).
// SIGINT / SIGTERM: stop accepting, let the running job finish within --shutdown-grace (else it is
// re-queued for the next start), exit 0; a second signal ends the process at once.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/model_flags.h"
#include "core/cache_dir.h"
#include "core/error.h"
#include "core/log.h"

#if LTX_WITH_SERVER
#include "backend/device_query.h"
#include "generate/engine.h"
#include "media/temp_output.h"
#include "server/engine_runner.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/routes.h"
#include "server/video_server.h"
#endif

namespace ltx::cli {

namespace {

struct ServeCli {
  ModelFlagsCli model;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string port_file;
  std::string api_key, api_key_file;
  std::string data_dir;
  int max_queue = 16;
  int max_batch = 1;
  double job_timeout_s = 0;
  double shutdown_grace_s = 30;
  double keep_outputs_for_s = 7 * 24 * 3600;
  int max_attempts = 2;
  int http_threads = 32;
  int64_t max_body_bytes = int64_t{64} << 20;
  int max_event_streams = 16;
  int max_sync_waits = 4;
  std::string model_memory_budget;
  std::vector<std::string> lora_library;
  std::string hdr_lora;
  int64_t max_width = 2048, max_height = 2048, max_frames = 257;
};

#if LTX_WITH_SERVER
// "40G", "512M", "1073741824": bytes.
int64_t parse_bytes(const std::string& s, const std::string& flag) {
  if (s.empty()) return 0;
  std::string digits = s;
  int64_t unit = 1;
  switch (s.back()) {
    case 'K': case 'k': unit = int64_t{1} << 10; break;
    case 'M': case 'm': unit = int64_t{1} << 20; break;
    case 'G': case 'g': unit = int64_t{1} << 30; break;
    case 'T': case 't': unit = int64_t{1} << 40; break;
    default: break;
  }
  if (unit != 1) digits.pop_back();
  const double v = parse_number(digits, flag);
  LTX_CHECK(v >= 0, flag, " ", s, " is negative; give bytes, or a number with K, M, G or T");
  return static_cast<int64_t>(v * static_cast<double>(unit));
}

// A signal may land on any thread (OpenBLAS and the HTTP pool start their own), so the handler only
// writes a byte to a pipe; a watcher thread reads it and drains the server from ordinary code. A
// second signal ends the process at once (the job store is safe against that).
int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};
static_assert(std::atomic<int>::is_always_lock_free);  // so the handler may use it

void on_stop_signal(int signo) {
  if (signo != 0 && g_signals.fetch_add(1) > 0) _exit(128 + signo);
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
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
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

std::string read_api_key(const ServeCli& c) {
  if (c.api_key_file.empty()) return c.api_key;
  LTX_CHECK(c.api_key.empty(), "--api-key and --api-key-file: give one of them");
  std::ifstream f(c.api_key_file);
  LTX_CHECK(f.good(), "--api-key-file ", c.api_key_file, ": cannot read it");
  std::string key;
  std::getline(f, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  LTX_CHECK(!key.empty(), "--api-key-file ", c.api_key_file, ": the first line is empty");
  return key;
}

std::string default_data_dir() {
  const auto base = user_data_dir();
  LTX_CHECK(base.has_value(), "no --data-dir, and neither XDG_DATA_HOME nor HOME is set to put "
                              "one under; pass --data-dir DIR");
  return (std::filesystem::path(*base) / "serve").string();
}

int run_serve(const ServeCli& c) {
  LTX_CHECK(c.max_queue >= 1, "--max-queue ", c.max_queue, " must be at least 1");
  LTX_CHECK(c.max_batch >= 1, "--max-batch ", c.max_batch, " must be at least 1");
  LTX_CHECK(c.max_attempts >= 1, "--max-attempts ", c.max_attempts, " must be at least 1");
  LTX_CHECK(c.job_timeout_s >= 0 && c.shutdown_grace_s >= 0 && c.keep_outputs_for_s >= 0,
            "--job-timeout, --shutdown-grace and --keep-outputs-for are seconds >= 0");
  const std::string api_key = read_api_key(c);
  // Before any model loads (the demo bundle included): a data dir that cannot be made or written.
  const std::string data_dir = c.data_dir.empty() ? default_data_dir() : c.data_dir;
  media::check_output_location((std::filesystem::path(data_dir) / "ltx-serve.db").string(), "--data-dir");
  if (c.host != "127.0.0.1" && c.host != "localhost" && c.host != "::1" && api_key.empty())
    log_warn("ltx serve: listening on ", c.host, " without --api-key: anyone who can reach it may "
             "submit jobs");

  generate::EngineOptions eo;
  eo.device = resolved_device(c.model);
  eo.offload = resolved_offload(c.model);
  eo.models = resolved_models(c.model);
  resolve_preset_files(c.model, eo.models, nullptr);  // --model: every file of the preset
  eo.model_budget_bytes = parse_bytes(c.model_memory_budget, "--model-memory-budget");
  eo.max_gpu_memory_bytes = resolved_gpu_budget(c.model);
  for (const std::string& entry : c.lora_library) {
    const size_t eq = entry.find('=');
    LTX_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < entry.size(), "--lora-library ", entry,
              ": give NAME=PATH (the name requests use in `loras`)");
    eo.lora_library[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  eo.hdr_lora = c.hdr_lora;
  generate::Engine engine(eo);
  const generate::EngineInfo& info = engine.info();
  if (info.demo)
    log_info("ltx serve: serving the built-in DEMO bundle (tiny model, RANDOM weights: its videos "
             "are noise); pass model files or --model PRESET to serve a real model");

  server::RequestLimits limits;
  limits.max_width = c.max_width;
  limits.max_height = c.max_height;
  limits.max_frames = c.max_frames;

  server::ServerOptions so;
  so.data_dir = data_dir;
  so.scheduler.max_queue = static_cast<size_t>(c.max_queue);
  so.scheduler.max_batch = static_cast<size_t>(c.max_batch);
  so.scheduler.job_timeout = std::chrono::milliseconds(static_cast<int64_t>(c.job_timeout_s * 1000));
  so.store.max_attempts = c.max_attempts;
  so.store.keep_outputs_for_s = static_cast<int64_t>(c.keep_outputs_for_s);

  server::Metrics metrics;
  const Device device = eo.device;
  server::VideoServer service(
      so, server::served_model(info, limits),
      [&](const server::DataDir& dir) {
        std::vector<std::unique_ptr<server::JobRunner>> runners;
        runners.push_back(std::make_unique<server::EngineRunner>(engine, device, dir, &metrics));
        return runners;
      },
      metrics);
  log_info("ltx serve: data dir ", so.data_dir, "; ", service.recovery().line());
  metrics.gauge("ltx_model_cache_bytes", "Bytes of the models kept loaded.", [&engine] {
    return std::vector<std::pair<server::Labels, double>>{
        {{}, static_cast<double>(engine.cache_stats().bytes)}};
  });
  metrics.gauge("ltx_device_memory_bytes",
                "Memory of the device the models run on: allocated now (live), held from the "
                "driver or the system (reserved), the most allocated at once (peak).",
                [device] {
                  const backend::MemoryStats m = backend::memory_stats(device);
                  return std::vector<std::pair<server::Labels, double>>{
                      {{{"kind", "live"}}, static_cast<double>(m.live_bytes)},
                      {{{"kind", "reserved"}}, static_cast<double>(m.reserved_bytes)},
                      {{{"kind", "peak"}}, static_cast<double>(m.peak_bytes)}};
                });
  service.set_status_extra([&engine] {
    const auto s = engine.cache_stats();
    return nlohmann::json{{"model_cache", {{"bytes", s.bytes},
                                           {"entries", s.entries},
                                           {"loads", s.loads},
                                           {"evictions", s.evictions},
                                           {"budget_bytes", s.budget_bytes}}}};
  });

  StopSignals signals;
  server::HttpOptions ho;
  ho.host = c.host;
  ho.port = c.port;
  ho.threads = c.http_threads;
  ho.max_body_bytes = c.max_body_bytes;
  ho.api_key = api_key;
  server::HttpServer http(ho);
  server::RouteOptions ro;
  ro.max_event_streams = c.max_event_streams;
  ro.max_sync_waits = c.max_sync_waits;
  server::add_routes(http, service, ro);
  http.bind();
  if (!c.port_file.empty()) write_port_file(c.port_file, http.port());
  log_info("ltx serve: listening on http://", c.host, ":", http.port(), " (model ", info.model_id,
           ", ", device.str(), ", --quantization ", quantization::mode_name(eo.models.quantization),
           api_key.empty() ? ", no API key" : ", API key required", ")");

  std::thread watcher([&] {
    const int signo = signals.wait();
    if (signo != 0)
      log_info("ltx serve: signal ", signo, ": no new jobs; the running one has ",
               c.shutdown_grace_s, " s to finish, else it is queued again for the next start");
    service.drain(std::chrono::milliseconds(static_cast<int64_t>(c.shutdown_grace_s * 1000)));
    http.stop();
  });
  std::thread serving([&] { http.serve(); });

  // Jobs may be queued while the models load; they start once the default pipeline is resident.
  try {
    const auto t0 = std::chrono::steady_clock::now();
    engine.preload(info.default_pipeline);
    log_info("ltx serve: models loaded in ",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), " s");
    service.start();  // nothing when a signal came meanwhile
    service.set_ready(true);
  } catch (...) {
    signals.wake();
    watcher.join();
    serving.join();
    throw;
  }
  serving.join();
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
  auto c = std::make_shared<ServeCli>();
  CLI::App* sub = app.add_subcommand(
      "serve",
      "Serve video generation over HTTP (the OpenAI / SGLang video API, a web page); without "
      "model files, serves the built-in demo (tiny random weights)");
  add_model_flags(sub, c->model);
  sub->add_option("--host", c->host, "Address to listen on (default 127.0.0.1: this machine only)");
  sub->add_option("--port", c->port, "TCP port (default 8000; 0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  sub->add_option("--port-file", c->port_file,
                  "Write the port listened on to this file once the server accepts connections");
  sub->add_option("--api-key", c->api_key,
                  "Require `Authorization: Bearer KEY` on every endpoint but /health and the page");
  sub->add_option("--api-key-file", c->api_key_file,
                  "Read the API key from the first line of this file (keeps it out of `ps`)");
  sub->add_option("--data-dir", c->data_dir,
                  "Where jobs, uploads and videos are kept (default $XDG_DATA_HOME/ltx/serve, "
                  "else ~/.local/share/ltx/serve); one server per folder");
  sub->add_option("--max-queue", c->max_queue,
                  "Jobs that may wait; beyond, creates get 429 with Retry-After (default 16)");
  sub->add_option("--max-batch", c->max_batch,
                  "Queued jobs of the same shape run together, at most N (default 1)");
  sub->add_option("--job-timeout", c->job_timeout_s,
                  "Seconds a job may run before it fails with code timeout (default 0: none)");
  sub->add_option("--shutdown-grace", c->shutdown_grace_s,
                  "Seconds the running job gets to finish on SIGTERM before it is re-queued "
                  "(default 30)");
  sub->add_option("--keep-outputs-for", c->keep_outputs_for_s,
                  "Seconds a finished job and its video are kept (default 604800 = 7 days; 0: "
                  "forever)");
  sub->add_option("--max-attempts", c->max_attempts,
                  "Runs a job may start; a job cut short by a crash this often fails as "
                  "interrupted (default 2)");
  sub->add_option("--http-threads", c->http_threads,
                  "HTTP worker threads; each open connection holds one (default 32)");
  sub->add_option("--max-body-bytes", c->max_body_bytes,
                  "Largest request body; larger gets 413 (default 67108864)");
  sub->add_option("--max-event-streams", c->max_event_streams,
                  "Open /events streams at once (default 16)");
  sub->add_option("--max-sync-waits", c->max_sync_waits,
                  "POST /v1/videos/sync requests waiting at once (default 4)");
  sub->add_option("--model-memory-budget", c->model_memory_budget,
                  "Bytes the resident models may take (e.g. 60G); the least recently used go "
                  "first. Default on CUDA: the GPU budget (--max-gpu-memory, else the device's "
                  "memory) less max(1/5 of it, min(6 GiB, 1/2 of it)) for activations, at least "
                  "the largest model; on the CPU: no limit");
  sub->add_option("--lora-library", c->lora_library,
                  "NAME=PATH: a LoRA requests may ask for by name in `loras` (repeatable)");
  sub->add_option("--hdr-lora", c->hdr_lora,
                  "The HDR IC-LoRA .safetensors the hdr-ic-lora pipeline runs with (its metadata names "
                  "the HDR transfer); without it, model files serve no hdr-ic-lora (the demo bundle "
                  "has its own)");
  sub->add_option("--max-width", c->max_width, "Widest video a request may ask for (default 2048)");
  sub->add_option("--max-height", c->max_height,
                  "Tallest video a request may ask for (default 2048)");
  sub->add_option("--max-frames", c->max_frames,
                  "Most frames a request may ask for (default 257)");
  return {sub, [c] { return run_serve(*c); }};
}

}  // namespace ltx::cli
