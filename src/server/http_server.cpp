#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cstdio>
#include <random>
#include <regex>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"

namespace ltx::server {

namespace {

// Not a secret: it only ties a response to the log, so a per-thread PRNG seeded once is enough.
std::string new_request_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof(buf), "req_%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return buf;
}

void ensure_request_id(httplib::Response& res) {
  if (!res.has_header("x-request-id")) res.set_header("x-request-id", new_request_id());
}

// Clearing the parsed ranges is how a response is kept whole: the library applies them to any
// routed response. The server owns the Request object (it is not const), so the cast is legal.
void clear_ranges(const httplib::Request& req) {
  const_cast<httplib::Request&>(req).ranges.clear();
}

bool is_public_path(const std::string& path) {
  return path == "/health" || path == "/" || path.rfind("/assets/", 0) == 0;
}

// The longest path a route serves ("/v1/videos/video_<32 hex>/content"; the assets' names are short):
// a longer one is answered 404 before any pattern sees it. std::regex (ours below and the library's
// route patterns) recurses per character and would exhaust a worker thread's stack on a path of a
// few thousand characters.
constexpr size_t kMaxRoutedPath = 256;

// The routes that keep a Range header; every other response goes out whole.
bool is_content_path(const std::string& path) {
  static const std::regex re(R"(^/v1/videos/[^/]+/content$)");
  return std::regex_match(path, re);
}

// The routes that accept a job's download token instead of the key (<video src>, EventSource).
const std::regex& token_path() {
  static const std::regex re(R"(^/v1/videos/(video_[0-9a-f]{32})/(content|events)$)");
  return re;
}

std::string bearer_token(const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  static const std::string prefix = "Bearer ";
  if (h.size() <= prefix.size() || h.compare(0, prefix.size(), prefix) != 0) return {};
  return h.substr(prefix.size());
}

// The JSON body of an error the library produced before (or instead of) a route.
ApiError library_error(const httplib::Request& req, int status, int64_t max_body_bytes) {
  switch (status) {
    case 404:
      return ApiError(404, "unknown_url", "Invalid URL (" + req.method + " " + req.path + ")");
    case 413:
      return ApiError(413, "request_too_large",
                      "the request body is larger than the server accepts (--max-body-bytes " +
                          std::to_string(max_body_bytes) + " bytes)");
    case 414:
      return ApiError(414, "uri_too_long", "the request URL is too long");
    case 416:
      return ApiError(416, "range_not_satisfiable",
                      "the Range header is not a valid byte range (e.g. bytes=0-99)");
    case 400:
      return ApiError(400, "bad_request",
                      "the request could not be read (a malformed request line, header or "
                      "multipart body)");
    default:
      return ApiError(status, "http_" + std::to_string(status),
                      "the request failed with HTTP status " + std::to_string(status));
  }
}

// The route of a path with the id folded, so that the counter's labels stay few; any path no route
// serves is "other" (request text never becomes a label).
std::string route_label(const std::string& path) {
  static const char* fixed[] = {"/",          "/health",    "/ready",         "/metrics",
                                "/v1/models", "/v1/videos", "/v1/videos/sync"};
  for (const char* f : fixed)
    if (path == f) return f;
  if (path.rfind("/assets/", 0) == 0) return "/assets/*";
  if (path.size() > kMaxRoutedPath) return "other";
  static const std::regex video(R"(^/v1/videos/[^/]+(/(content|events|cancel))?$)");
  std::smatch m;
  if (std::regex_match(path, m, video)) return "/v1/videos/{id}" + m[1].str();
  return "other";
}

bool is_known_method(const std::string& m) {
  return m == "GET" || m == "POST" || m == "DELETE" || m == "HEAD" || m == "PUT" || m == "PATCH" ||
         m == "OPTIONS";
}

}  // namespace

HttpServer::HttpServer(HttpOptions options)
    : options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  if (options_.threads < 1 || options_.threads > 4096)
    throw Error("--http-threads " + std::to_string(options_.threads) +
                " is not a thread count (1-4096; each open connection holds one)");
  if (options_.max_body_bytes < 1)
    throw Error("--max-body-bytes " + std::to_string(options_.max_body_bytes) +
                " must be positive (e.g. 67108864 for 64 MiB)");
  // The library's default adds SO_REUSEPORT, which lets a second server bind the same port and
  // silently share its connections; SO_REUSEADDR alone still allows a quick restart.
  server_->set_socket_options([this](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket_ = sock;
  });
  const auto threads = static_cast<size_t>(options_.threads);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_keep_alive_timeout(options_.keep_alive_s);
  server_->set_keep_alive_max_count(static_cast<size_t>(options_.keep_alive_max_requests));
  server_->set_read_timeout(options_.read_timeout_s, 0);
  server_->set_write_timeout(options_.write_timeout_s, 0);
  server_->set_payload_max_length(static_cast<size_t>(options_.max_body_bytes));
  install_handlers();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::set_download_token_lookup(
    std::function<std::string(const std::string& job_id)> lookup) {
  token_lookup_ = std::move(lookup);
}

bool HttpServer::authorized(const httplib::Request& req) const {
  if (options_.api_key.empty() || is_public_path(req.path)) return true;
  const std::string bearer = bearer_token(req);
  if (!bearer.empty() && constant_time_equal(bearer, options_.api_key)) return true;
  std::smatch m;
  if (token_lookup_ && req.has_param("token") && std::regex_match(req.path, m, token_path())) {
    const std::string expected = token_lookup_(m[1].str());
    return !expected.empty() && constant_time_equal(req.get_param_value("token"), expected);
  }
  return false;
}

void HttpServer::install_handlers() {
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    res.set_header("x-request-id", new_request_id());
    res.set_header("X-Content-Type-Options", "nosniff");
    if (req.path.size() > kMaxRoutedPath) {
      send_api_error(req, res,
                     ApiError(404, "unknown_url", "Invalid URL (the path is longer than any route's)"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!is_content_path(req.path)) clear_ranges(req);
    if (authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    const bool sent_key = req.has_header("Authorization");
    ApiError e(401, "invalid_api_key",
               sent_key ? "Incorrect API key provided (Authorization: Bearer KEY must be the "
                          "server's --api-key)"
                        : "You didn't provide an API key: send Authorization: Bearer KEY (the "
                          "server's --api-key)");
    send_api_error(req, res, e);
    res.set_header("WWW-Authenticate", "Bearer");
    // The body of a refused request stays unread on the connection, where it would be taken for
    // the next request: the response says Connection: close so that the client opens a new one.
    if (req.has_header("Transfer-Encoding") ||
        (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0"))
      close_connection_after(req);
    return httplib::Server::HandlerResponse::Handled;
  });

  server_->set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const ApiError& e) {
          send_api_error(req, res, e);
        } catch (const std::exception& e) {
          log_warn("ltx serve: ", req.method, " ", req.path, " failed: ", e.what());
          send_api_error(req, res,
                         ApiError(500, "internal_error",
                                  "internal server error (the server log has the "
                                  "details; x-request-id " +
                                      res.get_header_value("x-request-id") + ")"));
        } catch (...) {
          log_warn("ltx serve: ", req.method, " ", req.path, " failed: unknown exception");
          send_api_error(req, res, ApiError(500, "internal_error", "internal server error"));
        }
      });

  // Runs for every response with status >= 400. It fills the body only of the errors that have none
  // (the library's own), and answers Unhandled so that it never asks the library to apply ranges.
  server_->set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        ensure_request_id(res);
        if (res.body.empty() && !res.content_provider_) {
          const ApiError e = library_error(req, res.status, options_.max_body_bytes);
          res.set_content(e.json(), "application/json");
        }
        return httplib::Server::HandlerResponse::Unhandled;
      }));

  server_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    count_response(req.method, req.path, res.status);
    log_debug("ltx serve: ", req.method, " ", req.path, " ", res.status, " ",
              res.get_header_value("x-request-id"));
  });
}

void HttpServer::count_response(const std::string& method, const std::string& path, int status) {
  const std::string labels = "method=\"" + (is_known_method(method) ? method : "other") +
                             "\",route=\"" + route_label(path) + "\",code=\"" +
                             std::to_string(status) + "\"";
  std::lock_guard lock(counts_mutex_);
  ++response_counts_[labels];
}

std::string HttpServer::metrics_text() const {
  std::string out =
      "# HELP ltx_http_requests_total HTTP responses sent, by method, route and status.\n"
      "# TYPE ltx_http_requests_total counter\n";
  std::lock_guard lock(counts_mutex_);
  for (const auto& [labels, n] : response_counts_)
    out += "ltx_http_requests_total{" + labels + "} " + std::to_string(n) + "\n";
  return out;
}

void HttpServer::bind() {
  if (options_.port < 0 || options_.port > 65535)
    throw Error("--port " + std::to_string(options_.port) + " is not a TCP port (0-65535)");
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
  } else {
    port_ = server_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  if (port_ <= 0)
    throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                " (--host / --port): the address is not local to this machine or the port is in "
                "use; pick another with --port");
  // The library listens with a backlog of 5 (fixed in the .so): a burst of clients overflows it and
  // some connections are reset. A second listen() on the socket raises the backlog (Linux).
  if (listen_socket_ >= 0) ::listen(listen_socket_, SOMAXCONN);
}

void HttpServer::serve() {
  LTX_CHECK(port_ > 0, "HttpServer::serve() before bind()");
  serve_entered_ = true;
  if (!stopping_) server_->listen_after_bind();
  serve_returned_ = true;
}

void HttpServer::stop() {
  stopping_ = true;
  if (!server_) return;
  // cpp-httplib's stop() does nothing until the listen loop is running, and the loop then never
  // ends. serve() checks stopping_ after announcing itself, and this checks serve_entered_ after
  // setting stopping_ (both sequentially consistent), so either serve() returns without listening
  // or this waits, briefly, for its loop to start before stopping it.
  if (serve_entered_)
    while (!server_->is_running() && !serve_returned_) std::this_thread::yield();
  server_->stop();
}

void add_health_route(httplib::Server& server) {
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
}

void send_api_error(const httplib::Request& req, httplib::Response& res, const ApiError& error) {
  clear_ranges(req);
  res.status = error.status();
  ensure_request_id(res);
  if (error.retry_after_s) res.set_header("Retry-After", std::to_string(*error.retry_after_s));
  if (error.status() == 409) res.set_header("x-should-retry", "false");
  res.set_content(error.json(), "application/json");
}

void close_connection_after(const httplib::Request& req) {
  // The library ends a kept-alive connection only for a request that asked; it answers such a
  // request with Connection: close, which clients honour.
  auto& headers = const_cast<httplib::Request&>(req).headers;
  headers.erase("Connection");
  headers.emplace("Connection", "close");
}

RangeFix fix_content_ranges(ByteRanges& ranges, int64_t size) {
  if (ranges.size() != 1) {
    ranges.clear();  // none: the whole file; several: the whole file too (a plain 200)
    return RangeFix::Satisfiable;
  }
  auto& [first, last] = ranges.front();
  const auto n = static_cast<ssize_t>(size);
  if (first == -1 && last == -1) {  // "bytes=-": the whole file
    ranges.clear();
    return RangeFix::Satisfiable;
  }
  if (first == -1) {  // a suffix of `last` bytes
    if (last == 0 || n == 0) {
      ranges.clear();
      return RangeFix::NotSatisfiable;
    }
    if (last > n) last = n;
    return RangeFix::Satisfiable;
  }
  if (first >= n) {
    ranges.clear();
    return RangeFix::NotSatisfiable;
  }
  if (last == -1 || last >= n) last = n - 1;
  return RangeFix::Satisfiable;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walks the longer string whatever the contents, so the time tells at most the lengths.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace ltx::server
