// The server's HTTP layer over real loopback sockets.
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "core/error.h"
#include "server/http_server.h"

namespace ltx::server {
namespace {

TEST(ServerSmoke, HealthOverLoopback) {
  HttpServer http({"127.0.0.1", 0});
  add_health_route(http.routes());
  http.bind();
  ASSERT_GT(http.port(), 0);
  std::thread t([&] { http.serve(); });
  httplib::Client c("127.0.0.1", http.port());
  const auto r = c.Get("/health");
  http.stop();
  t.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, R"({"status":"ok"})");
}

TEST(ServerSmoke, APortInUseIsAClearError) {
  HttpServer first({"127.0.0.1", 0});
  first.bind();
  HttpServer second({"127.0.0.1", first.port()});
  try {
    second.bind();
    FAIL() << "bound a port in use";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--port"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ltx::server
