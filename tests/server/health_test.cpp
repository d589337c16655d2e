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

// A stop that comes before the listen loop runs (a signal right after start-up) still ends serve():
// cpp-httplib alone would ignore it and listen forever. Each ordering, many times.
TEST(ServerSmoke, AStopRacingTheStartOfServeEndsIt) {
  {
    HttpServer http({"127.0.0.1", 0});
    http.bind();
    http.stop();
    http.serve();  // returns at once
  }
  for (int i = 0; i < 200; ++i) {
    HttpServer http({"127.0.0.1", 0});
    http.bind();
    std::thread t([&] { http.serve(); });
    http.stop();
    t.join();
  }
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
