#pragma once
// The HTTP layer of `ltx serve`: one cpp-httplib server bound to a loopback (or the operator's)
// address, with the routes the server registers on it. Debian's cpp-httplib is a compiled library;
// its header is only included here and in the route files, built with the Cflags pkg-config gives.
#include <memory>
#include <string>

namespace httplib {
class Server;
}

namespace ltx::server {

struct HttpOptions {
  std::string host = "127.0.0.1";  // only loopback unless the operator says otherwise
  int port = 8000;                  // 0: any free port (tests); port() says which
};

class HttpServer {
 public:
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
  // Safe from any thread; serve() returns after the connections in flight end.
  void stop();

  httplib::Server& routes() { return *server_; }

 private:
  HttpOptions options_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
};

// The `/health` route: alive, no key needed.
void add_health_route(httplib::Server& server);

}  // namespace ltx::server
