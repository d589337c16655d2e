// Pins the behaviour of Debian's cpp-httplib (0.11.4) that the server is built on, so that a
// library update that changes any of it fails here, loudly, instead of in a route.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "support/loopback_http.h"

namespace {

// A server on a free loopback port, serving on its own thread until the test ends.
class LoopbackServer {
 public:
  LoopbackServer() = default;
  ~LoopbackServer() { stop(); }
  httplib::Server& operator*() { return server_; }
  httplib::Server* operator->() { return &server_; }
  int start() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    EXPECT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    ltx::test::wait_until_listening(server_);
    return port_;
  }
  void stop() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(std::chrono::seconds(10));
    return c;
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

TEST(HttplibContract, OversizeBodyIs413BeforeTheHandlerRuns) {
  LoopbackServer s;
  std::atomic<bool> handler_ran{false};
  s->set_payload_max_length(1024);
  s->Post("/p", [&](const httplib::Request&, httplib::Response& res) {
    handler_ran = true;
    res.set_content("{}", "application/json");
  });
  std::atomic<int> error_handler_status{0};
  s->set_error_handler([&](const httplib::Request&, httplib::Response& res) {
    error_handler_status = res.status;
  });
  s.start();
  auto c = s.client();
  const auto small = c.Post("/p", std::string(1000, 'x'), "text/plain");
  ASSERT_TRUE(small);
  EXPECT_EQ(small->status, 200);
  handler_ran = false;
  const auto big = c.Post("/p", std::string(4096, 'x'), "text/plain");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_FALSE(handler_ran.load());
  // The error handler sees the 413, so the server can give it the JSON error body.
  EXPECT_EQ(error_handler_status.load(), 413);
}

TEST(HttplibContract, MultipartTextFieldsLandInFiles) {
  LoopbackServer s;
  std::string prompt, seed, image_name, image_type, image_bytes;
  bool prompt_in_params = true;
  s->Post("/m", [&](const httplib::Request& req, httplib::Response& res) {
    ASSERT_TRUE(req.is_multipart_form_data());
    prompt = req.get_file_value("prompt").content;
    seed = req.get_file_value("seed").content;
    const auto img = req.get_file_value("input_reference");
    image_name = img.filename;
    image_type = img.content_type;
    image_bytes = img.content;
    prompt_in_params = req.has_param("prompt");
    res.set_content("{}", "application/json");
  });
  s.start();
  auto c = s.client();
  const std::string png("\x89PNG\r\n\x1a\n\0\0", 10);
  const httplib::MultipartFormDataItems items = {
      {"prompt", "a cat", "", ""},
      {"seed", "7", "", ""},
      {"input_reference", png, "ref.png", "image/png"},
  };
  const auto r = c.Post("/m", items);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(prompt, "a cat");
  EXPECT_EQ(seed, "7");
  EXPECT_FALSE(prompt_in_params);
  EXPECT_EQ(image_name, "ref.png");
  EXPECT_EQ(image_type, "image/png");
  EXPECT_EQ(image_bytes, png);
}

TEST(HttplibContract, ContentProviderServesRanges) {
  // Declared before the server, so it outlives the server's threads: they may still be sending
  // from it after the client has its answer (ThreadSanitizer saw that after the 416).
  const std::string body = [] {
    std::string b(1000, '\0');
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>('a' + i % 26);
    return b;
  }();
  LoopbackServer s;
  s->Get("/v", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content_provider(body.size(), "video/mp4",
                             [&](size_t offset, size_t length, httplib::DataSink& sink) {
                               sink.write(body.data() + offset, length);
                               return true;
                             });
  });
  s.start();
  auto c = s.client();
  const auto whole = c.Get("/v");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 200);
  EXPECT_EQ(whole->body, body);

  const auto open_end = c.Get("/v", {{"Range", "bytes=0-"}});
  ASSERT_TRUE(open_end);
  EXPECT_EQ(open_end->status, 206);
  EXPECT_EQ(open_end->body, body);
  EXPECT_EQ(open_end->get_header_value("Content-Range"), "bytes 0-999/1000");

  const auto mid = c.Get("/v", {{"Range", "bytes=100-199"}});
  ASSERT_TRUE(mid);
  EXPECT_EQ(mid->status, 206);
  EXPECT_EQ(mid->body, body.substr(100, 100));

  const auto suffix = c.Get("/v", {{"Range", "bytes=-10"}});
  ASSERT_TRUE(suffix);
  EXPECT_EQ(suffix->status, 206);
  EXPECT_EQ(suffix->body, body.substr(990));

  const auto garbage = c.Get("/v", {{"Range", "bytes=x-y"}});
  ASSERT_TRUE(garbage);
  EXPECT_EQ(garbage->status, 416);
}

// The quirk the server's Range helper exists for: the library applies a request's Range to every
// routed response, a JSON error body included. If this starts failing, the library now leaves
// non-content responses alone and the helper's clearing of req.ranges may be dropped.
TEST(HttplibContract, RangesAreAppliedToEveryRoutedResponse) {
  LoopbackServer s;
  s->Get("/e", [](const httplib::Request&, httplib::Response& res) {
    res.status = 409;
    res.set_content(R"({"error":{"message":"not ready"}})", "application/json");
  });
  s.start();
  auto c = s.client();
  const auto r = c.Get("/e", {{"Range", "bytes=0-4"}});
  ASSERT_TRUE(r);
  EXPECT_NE(r->body, R"({"error":{"message":"not ready"}})");
}

TEST(HttplibContract, EventStreamIsNotCompressed) {
  LoopbackServer s;
  s->Get("/sse", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream",
                                     [n = 0](size_t, httplib::DataSink& sink) mutable {
                                       if (n++ < 3) {
                                         const std::string ev = "data: {\"n\":" +
                                                                std::to_string(n) + "}\n\n";
                                         sink.write(ev.data(), ev.size());
                                       } else {
                                         sink.done();
                                       }
                                       return true;
                                     });
  });
  s->Get("/json", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(4000, ' ') + "{}", "application/json");
  });
  s.start();
  auto c = s.client();
  c.set_decompress(false);
  const httplib::Headers accept = {{"Accept-Encoding", "gzip, br"}};
  const auto sse = c.Get("/sse", accept);
  ASSERT_TRUE(sse);
  EXPECT_EQ(sse->status, 200);
  EXPECT_FALSE(sse->has_header("Content-Encoding"));
  EXPECT_EQ(sse->body, "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: {\"n\":3}\n\n");
  // JSON is compressed when the client accepts it (so a JSON test client must decompress).
  const auto json = c.Get("/json", accept);
  ASSERT_TRUE(json);
  EXPECT_TRUE(json->has_header("Content-Encoding"));
}

// stop() waits for the handlers in flight: a long event stream must poll a stop flag of its own,
// and then stop() returns.
TEST(HttplibContract, StopReturnsOnceAStreamingProviderSeesItsFlag) {
  LoopbackServer s;
  std::atomic<bool> stopping{false}, streaming{false};
  s->Get("/sse", [&](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider("text/event-stream", [&](size_t, httplib::DataSink& sink) {
      streaming = true;
      if (stopping) {
        sink.done();
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return sink.is_writable();
    });
  });
  s.start();
  std::thread reader([&] {
    auto c = s.client();
    c.Get("/sse");
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!streaming && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(streaming.load());
  stopping = true;
  const auto t0 = std::chrono::steady_clock::now();
  s.stop();
  reader.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

}  // namespace
