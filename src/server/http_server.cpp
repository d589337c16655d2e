#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include "core/error.h"

namespace ltx::server {

HttpServer::HttpServer(HttpOptions options)
    : options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  // The library's default adds SO_REUSEPORT, which lets a second server bind the same port and
  // silently share its connections; SO_REUSEADDR alone still allows a quick restart.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

HttpServer::~HttpServer() { stop(); }

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
}

void HttpServer::serve() {
  LTX_CHECK(port_ > 0, "HttpServer::serve() before bind()");
  server_->listen_after_bind();
}

void HttpServer::stop() {
  if (server_) server_->stop();
}

void add_health_route(httplib::Server& server) {
  server.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
}

}  // namespace ltx::server
