#pragma once
// The HTTP layer of `ltx serve`: one cpp-httplib server bound to a loopback (or the operator's)
// address, with the routes the server registers on it. Debian's cpp-httplib is a compiled library;
// its header is only included here and in the route files, built with the Cflags pkg-config gives.
//
// What every route gets from this layer (docs/SERVER.md, "Security"):
//   - a bounded thread pool, keep-alive and read/write timeouts, a request body limit (413);
//   - an `x-request-id` on every response, and `X-Content-Type-Options: nosniff`;
//   - errors as the OpenAI-shaped JSON of ApiError: a handler throws ApiError (its status, body and
//     Retry-After are sent), any other exception becomes a 500 whose message stays in the log, and
//     the library's own errors (404 unknown route, 413, 416, 400) get the same JSON body;
//   - with an API key, `Authorization: Bearer KEY` on every route but /health and the page
//     (/, /assets/*); a job's content and events also accept `?token=<its download token>`;
//   - Range requests only on a job's content (the library would apply them to any response).
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace ltx::server {

class ApiError;

struct HttpOptions {
  std::string host = "127.0.0.1";  // only loopback unless the operator says otherwise
  int port = 8000;                 // 0: any free port (tests); port() says which
  // Pool threads: each open connection (keep-alive, event stream, sync wait) holds one.
  int threads = 32;
  int64_t max_body_bytes = int64_t{64} << 20;
  int keep_alive_s = 5;
  int keep_alive_max_requests = 100;
  int read_timeout_s = 30;
  int write_timeout_s = 30;
  std::string api_key;  // empty: no authentication
};

class HttpServer {
 public:
  // Throws ltx::Error naming the flag (--http-threads, --max-body-bytes) of an impossible option.
  explicit HttpServer(HttpOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the socket (throws ltx::Error naming --host / --port when it cannot). Routes may be added
  // before or after binding, but before serve().
  void bind();
  int port() const { return port_; }
  // Accepts connections until stop(); returns then. Runs on the caller's thread.
  void serve();
  // Safe from any thread; serve() returns after the connections in flight end, so long handlers
  // (event streams, sync waits) poll stopping() and end.
  void stop();
  bool stopping() const { return stopping_.load(); }

  const HttpOptions& options() const { return options_; }
  // How a job's download token is found, for `?token=` on its content and events (empty: none).
  void set_download_token_lookup(std::function<std::string(const std::string& job_id)> lookup);

  httplib::Server& routes() { return *server_; }

  // The responses sent so far, by method, route (ids folded: /v1/videos/{id}) and status, as the
  // Prometheus counter ltx_http_requests_total (text exposition format).
  std::string metrics_text() const;

 private:
  void count_response(const std::string& method, const std::string& path, int status);
  void install_handlers();
  bool authorized(const httplib::Request& req) const;

  HttpOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::function<std::string(const std::string&)> token_lookup_;
  std::atomic<bool> stopping_{false};
  // serve() has begun / has returned: the library ignores a stop() that comes before its listen
  // loop runs, so stop() waits for one or the other (see stop()).
  std::atomic<bool> serve_entered_{false};
  std::atomic<bool> serve_returned_{false};
  mutable std::mutex counts_mutex_;
  std::map<std::string, uint64_t> response_counts_;  // the label set -> count
  int listen_socket_ = -1;
  int port_ = 0;
};

// The `/health` route: alive, no key needed.
void add_health_route(httplib::Server& server);

// Writes `error` as the response: its status, the JSON body, Retry-After when it has one, and
// `x-should-retry: false` on a 409 (the OpenAI SDKs otherwise retry a 409). Clears the request's
// ranges, so that the library does not cut the JSON body to a requested byte range.
void send_api_error(const httplib::Request& req, httplib::Response& res, const ApiError& error);

// Makes the response say Connection: close, for a request whose body was left (partly) unread:
// on a kept-alive connection the rest would be taken for the next request.
void close_connection_after(const httplib::Request& req);

// Byte ranges as cpp-httplib parses them: {first, last}, -1 for an absent end ("bytes=-N" is
// {-1, N}, "bytes=N-" is {N, -1}).
using ByteRanges = std::vector<std::pair<ssize_t, ssize_t>>;
enum class RangeFix { Satisfiable, NotSatisfiable };
// Makes the ranges of a request for a `size`-byte file safe to hand to the library, which neither
// clamps nor checks them: an end past the file is clamped to its last byte; several ranges are
// dropped (the whole file, 200: browsers and players ask for one); a start at or past the end, or
// an empty suffix, is NotSatisfiable (send 416 with `Content-Range: bytes */size`), and the ranges
// are then cleared so the error body goes out whole.
RangeFix fix_content_ranges(ByteRanges& ranges, int64_t size);

// Equal strings, in a time that does not depend on where they differ (API key checks).
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace ltx::server
