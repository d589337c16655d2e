// The routes of `ltx serve` over real loopback sockets, on an in-memory VideoService: every row of
// the endpoint table (docs/SERVER.md, "Endpoints") with its status, the OpenAI error shape and the
// request id; authentication; the body limit; ids; Range; the event stream; sync; concurrency.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "io/io_test_util.h"
#include "server/http_server.h"
#include "server/in_memory_video_service.h"
#include "server/routes.h"

namespace ltx::server::http_routes_test {
namespace {

using nlohmann::json;
using test::InMemoryVideoService;
using Clock = std::chrono::steady_clock;

// Polls `pred` until it holds or `limit` passes (every wait in these tests is bounded).
bool wait_until(const std::function<bool()>& pred,
                std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

std::string bytes_of(size_t n) {
  std::string b(n, '\0');
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>('a' + i % 26);
  return b;
}

// A server with the routes over an InMemoryVideoService, serving on its own thread.
class Routes : public ::testing::Test {
 protected:
  void start(HttpOptions http_options = {}, RouteOptions route_options = {}) {
    http_options.host = "127.0.0.1";
    http_options.port = 0;
    service_ = std::make_unique<InMemoryVideoService>(dir_.file(""));
    http_ = std::make_unique<HttpServer>(http_options);
    add_routes(*http_, *service_, route_options);
    http_->bind();
    thread_ = std::thread([this] { http_->serve(); });
  }
  void TearDown() override {
    if (http_) http_->stop();
    if (thread_.joinable()) thread_.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", http_->port());
    c.set_read_timeout(std::chrono::seconds(30));
    return c;
  }
  // Creates a job through the API and returns its Video object.
  json create(const std::string& prompt = "a cat", const httplib::Headers& headers = {}) {
    auto c = client();
    const auto r =
        c.Post("/v1/videos", headers, json{{"prompt", prompt}}.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    return json::parse(r->body);
  }
  InMemoryVideoService& service() { return *service_; }

  ltx::test::TempDir dir_;
  std::unique_ptr<InMemoryVideoService> service_;
  std::unique_ptr<HttpServer> http_;
  std::thread thread_;
};

// The OpenAI error shape, its status and the request id.
void expect_error(const httplib::Result& r, int status, const std::string& code = {},
                  const std::string& param = {}) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_TRUE(r->has_header("x-request-id"));
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  const json body = json::parse(r->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r->body;
  ASSERT_TRUE(body.contains("error")) << r->body;
  const json& e = body["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
  std::string type = "invalid_request_error";
  if (status == 401) type = "authentication_error";
  if (status == 429) type = "rate_limit_error";
  if (status >= 500) type = "server_error";
  EXPECT_EQ(e["type"], type) << r->body;
  if (!code.empty()) {
    EXPECT_EQ(e["code"], code) << r->body;
  }
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << r->body;
  }
}

TEST_F(Routes, CreateRetrieveListDeleteRoundTrip) {
  start();
  auto c = client();
  const auto created = c.Post("/v1/videos", R"({"prompt":"a red fox"})", "application/json");
  ASSERT_TRUE(created);
  EXPECT_EQ(created->status, 200);
  EXPECT_TRUE(created->has_header("x-request-id"));
  const json v = json::parse(created->body);
  EXPECT_EQ(v["object"], "video");
  EXPECT_EQ(v["status"], "queued");
  EXPECT_EQ(v["progress"], 0);
  EXPECT_EQ(v["prompt"], "a red fox");
  EXPECT_TRUE(v["completed_at"].is_null());
  EXPECT_TRUE(v["error"].is_null());
  const std::string id = v["id"];
  EXPECT_TRUE(is_job_id(id));

  const auto got = c.Get("/v1/videos/" + id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_EQ(json::parse(got->body)["id"], id);

  const auto listed = c.Get("/v1/videos");
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->status, 200);
  const json page = json::parse(listed->body);
  EXPECT_EQ(page["object"], "list");
  ASSERT_EQ(page["data"].size(), 1u);
  EXPECT_EQ(page["first_id"], id);
  EXPECT_EQ(page["last_id"], id);
  EXPECT_EQ(page["has_more"], false);

  const auto deleted = c.Delete("/v1/videos/" + id);
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200);
  EXPECT_EQ(json::parse(deleted->body),
            (json{{"id", id}, {"object", "video.deleted"}, {"deleted", true}}));
  expect_error(c.Get("/v1/videos/" + id), 404, "not_found");
  expect_error(c.Delete("/v1/videos/" + id), 404, "not_found");
}

TEST_F(Routes, MultipartPartsReachTheServiceInTheOrderSent) {
  start();
  auto c = client();
  const std::string png("\x89PNG\r\n\x1a\n", 8);
  const httplib::MultipartFormDataItems items = {
      {"prompt", "a cat", "", ""},
      {"images[][image]", png, "a.png", "image/png"},
      {"images[][frame_index]", "0", "", ""},
      {"images[][image]", png, "b.png", "image/png"},
      {"images[][frame_index]", "8", "", ""},
  };
  const auto r = c.Post("/v1/videos", items);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  const auto bodies = service().bodies();
  ASSERT_EQ(bodies.size(), 1u);
  ASSERT_TRUE(bodies[0].multipart);
  ASSERT_EQ(bodies[0].parts.size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(bodies[0].parts[i].name, items[i].name);
    EXPECT_EQ(bodies[0].parts[i].content, items[i].content);
    EXPECT_EQ(bodies[0].parts[i].filename, items[i].filename);
    EXPECT_EQ(bodies[0].parts[i].content_type, items[i].content_type);
  }
}

TEST_F(Routes, ServiceErrorsAndUnknownRoutesHaveTheErrorShape) {
  start();
  auto c = client();
  expect_error(c.Post("/v1/videos", R"({"seconds":"4"})", "application/json"), 400, "missing_field",
               "prompt");
  expect_error(c.Post("/v1/videos", "not json", "application/json"), 400, "invalid_json");
  // No body at all still reaches the service, which says what is wrong with it.
  expect_error(c.Post("/v1/videos"), 400, "invalid_json");
  const std::string id = create()["id"];
  for (const std::string& path : {"/v1/videos/" + id + "/remix", std::string("/v1/videos/edits"),
                                  std::string("/v1/videos/extensions"),
                                  std::string("/v1/videos/characters"), std::string("/v1/nope")}) {
    const auto r = c.Post(path, "{}", "application/json");
    expect_error(r, 404, "unknown_url");
    EXPECT_NE(r->body.find("Invalid URL (POST " + path + ")"), std::string::npos) << r->body;
  }
  expect_error(c.Get("/v2/videos"), 404, "unknown_url");
}

TEST_F(Routes, MalformedIdsAre404WithoutALookup) {
  start();
  auto c = client();
  const std::vector<std::string> bad = {"/v1/videos/video_ZZ",
                                        "/v1/videos/..%2Fx",
                                        "/v1/videos/../x",
                                        "/v1/videos/video_" + std::string(32, 'A'),
                                        "/v1/videos/video_" + std::string(2000, 'a'),
                                        "/v1/videos/video_" + std::string(8000, 'a'),
                                        "/v1/videos/video_" + std::string(31, 'a'),
                                        "/v1/videos/%00"};
  for (const auto& path : bad) {
    for (const auto& r : {c.Get(path), c.Get(path + "/content"), c.Get(path + "/events"),
                          c.Delete(path), c.Post(path + "/cancel")}) {
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, 404) << path;
      EXPECT_TRUE(json::parse(r->body, nullptr, false).contains("error")) << path << r->body;
      // Request text of any length is never echoed.
      EXPECT_LT(r->body.size(), 400u) << path;
    }
  }
  // A well-formed id that does not exist.
  expect_error(c.Get("/v1/videos/video_" + std::string(32, 'a')), 404, "not_found", "id");
}

TEST_F(Routes, ListValidatesItsParametersAndPages) {
  start();
  auto c = client();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(create("p" + std::to_string(i))["id"]);
  for (const char* q : {"limit=0", "limit=101", "limit=abc", "limit=-1", "limit=1.5"})
    expect_error(c.Get(std::string("/v1/videos?") + q), 400, "invalid_value", "limit");
  expect_error(c.Get("/v1/videos?order=sideways"), 400, "invalid_value", "order");
  expect_error(c.Get("/v1/videos?after=bogus"), 400, "invalid_value", "after");
  expect_error(c.Get("/v1/videos?after=video_" + std::string(32, 'f')), 400);

  // Newest first, one per page, across pages with `after`.
  std::vector<std::string> seen;
  std::string after;
  for (int guard = 0; guard < 10; ++guard) {
    const auto r = c.Get("/v1/videos?limit=1" + (after.empty() ? "" : "&after=" + after));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json page = json::parse(r->body);
    if (page["data"].empty()) break;
    seen.push_back(page["data"][0]["id"]);
    after = page["last_id"];
    if (!page["has_more"].get<bool>()) break;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{ids[2], ids[1], ids[0]}));
  const auto asc = c.Get("/v1/videos?order=asc&limit=100");
  ASSERT_TRUE(asc);
  EXPECT_EQ(json::parse(asc->body)["first_id"], ids[0]);
}

TEST_F(Routes, AnApiKeyGuardsEveryRouteButHealthAndThePage) {
  HttpOptions o;
  o.api_key = "s3cret-key";
  start(o);
  auto c = client();
  const httplib::Headers right = {{"Authorization", "Bearer s3cret-key"}};
  const httplib::Headers wrong = {{"Authorization", "Bearer s3cret-kez"}};
  const httplib::Headers shorter = {{"Authorization", "Bearer s3cret"}};
  const httplib::Headers basic = {{"Authorization", "Basic s3cret-key"}};

  for (const auto& path : {"/v1/videos", "/v1/models", "/ready", "/metrics"}) {
    const auto none = c.Get(path);
    expect_error(none, 401, "invalid_api_key");
    EXPECT_EQ(none->get_header_value("WWW-Authenticate"), "Bearer");
    expect_error(c.Get(path, wrong), 401, "invalid_api_key");
    expect_error(c.Get(path, shorter), 401);
    expect_error(c.Get(path, basic), 401);
    const auto ok = c.Get(path, right);
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->status, 200) << path;
  }
  expect_error(c.Post("/v1/videos", R"({"prompt":"x"})", "application/json"), 401);
  EXPECT_TRUE(service().ids().empty()) << "an unauthorized create reached the service";
  // An unknown route is 401 too: without the key nothing says which routes exist.
  expect_error(c.Get("/v1/secret"), 401);

  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/")->status, 200);
  EXPECT_EQ(c.Get("/assets/app.js")->status, 200);

  // The download token opens the job's content and events, and nothing else.
  const json v = create("a cat", right);
  const std::string id = v["id"];
  const std::string token = service().download_token(id);
  ASSERT_FALSE(token.empty());
  EXPECT_NE(v["events_url"].get<std::string>().find("token=" + token), std::string::npos);
  service().complete(id, bytes_of(100));
  const auto content = c.Get("/v1/videos/" + id + "/content?token=" + token);
  ASSERT_TRUE(content);
  EXPECT_EQ(content->status, 200);
  EXPECT_EQ(content->body, bytes_of(100));
  const json done = json::parse(c.Get("/v1/videos/" + id, right)->body);
  EXPECT_EQ(done["download_url"], "/v1/videos/" + id + "/content?token=" + token);
  expect_error(c.Get("/v1/videos/" + id + "/content?token=" + token + "x"), 401);
  expect_error(c.Get("/v1/videos/" + id + "/content?token="), 401);
  expect_error(c.Get("/v1/videos/" + id + "?token=" + token), 401);
  expect_error(c.Delete("/v1/videos/" + id + "?token=" + token), 401);
  // Another job's token does not open this one.
  const std::string other = create("a dog", right)["id"];
  expect_error(c.Get("/v1/videos/" + id + "/content?token=" + service().download_token(other)),
               401);
  const auto events = c.Get("/v1/videos/" + id + "/events?token=" + token);
  ASSERT_TRUE(events);
  EXPECT_EQ(events->status, 200);
  EXPECT_NE(events->body.find("event: video.completed"), std::string::npos) << events->body;
}

TEST_F(Routes, ARefusedBodyDoesNotSpoilTheKeptAliveConnection) {
  HttpOptions o;
  o.api_key = "k";
  start(o);
  auto c = client();
  c.set_keep_alive(true);
  const httplib::MultipartFormDataItems items = {
      {"prompt", "a cat", "", ""},
      {"input_reference", std::string(20000, 'x'), "a.png", "image/png"}};
  const auto refused = c.Post("/v1/videos", {{"Authorization", "Bearer wrong"}}, items);
  expect_error(refused, 401);
  EXPECT_EQ(refused->get_header_value("Connection"), "close");
  const auto accepted = c.Post("/v1/videos", {{"Authorization", "Bearer k"}}, items);
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->status, 200) << accepted->body;
}

TEST_F(Routes, TooManyFormPartsIs400AndTheConnectionRecovers) {
  RouteOptions ro;
  ro.max_form_parts = 3;
  start({}, ro);
  auto c = client();
  c.set_keep_alive(true);
  httplib::MultipartFormDataItems items = {{"prompt", "a cat", "", ""}};
  for (int i = 0; i < 5; ++i) items.push_back({"seed", std::to_string(i), "", ""});
  const auto refused = c.Post("/v1/videos", items);
  expect_error(refused, 400, "too_many_parts");
  EXPECT_EQ(refused->get_header_value("Connection"), "close");
  items.resize(2);
  const auto accepted = c.Post("/v1/videos", items);
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->status, 200) << accepted->body;
}

TEST_F(Routes, AnOversizeBodyIs413AsJson) {
  HttpOptions o;
  o.max_body_bytes = 1024;
  start(o);
  auto c = client();
  const auto big =
      c.Post("/v1/videos", json{{"prompt", std::string(4096, 'x')}}.dump(), "application/json");
  expect_error(big, 413, "request_too_large");
  EXPECT_NE(big->body.find("--max-body-bytes"), std::string::npos);
  const httplib::MultipartFormDataItems items = {
      {"prompt", "a cat", "", ""},
      {"input_reference", std::string(4096, 'x'), "a.png", "image/png"}};
  expect_error(c.Post("/v1/videos", items), 413, "request_too_large");
  expect_error(c.Post("/v1/videos/sync", items), 413, "request_too_large");
  EXPECT_TRUE(service().ids().empty());
  // A body within the limit still works on the same server.
  EXPECT_EQ(c.Post("/v1/videos", R"({"prompt":"ok"})", "application/json")->status, 200);
}

TEST_F(Routes, ContentServesRangesTheWayBrowsersNeed) {
  start();
  auto c = client();
  const std::string id = create()["id"];
  const std::string body = bytes_of(1000);
  service().complete(id, body);
  const std::string path = "/v1/videos/" + id + "/content";

  const auto whole = c.Get(path);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 200);
  EXPECT_EQ(whole->body, body);
  EXPECT_EQ(whole->get_header_value("Content-Type"), "video/mp4");
  EXPECT_EQ(whole->get_header_value("Accept-Ranges"), "bytes");
  EXPECT_EQ(whole->get_header_value("ETag"), "\"etag-" + id + "\"");

  struct Case {
    std::string range;
    int status;
    std::string content_range, body;
  };
  const std::vector<Case> cases = {
      {"bytes=0-99", 206, "bytes 0-99/1000", body.substr(0, 100)},
      {"bytes=100-", 206, "bytes 100-999/1000", body.substr(100)},
      {"bytes=-100", 206, "bytes 900-999/1000", body.substr(900)},
      {"bytes=-5000", 206, "bytes 0-999/1000", body},
      {"bytes=900-5000", 206, "bytes 900-999/1000", body.substr(900)},  // clamped
      {"bytes=999-999", 206, "bytes 999-999/1000", body.substr(999)},
      {"bytes=0-9,20-29", 200, "", body},  // several ranges: the whole file
  };
  for (const Case& k : cases) {
    const auto r = c.Get(path, {{"Range", k.range}});
    ASSERT_TRUE(r) << k.range;
    EXPECT_EQ(r->status, k.status) << k.range;
    EXPECT_EQ(r->get_header_value("Content-Range"), k.content_range) << k.range;
    EXPECT_EQ(r->body, k.body) << k.range;
    EXPECT_TRUE(r->has_header("x-request-id"));
  }
  for (const char* range : {"bytes=1000-", "bytes=5000-6000", "bytes=-0"}) {
    const auto r = c.Get(path, {{"Range", range}});
    expect_error(r, 416, "range_not_satisfiable");
    EXPECT_EQ(r->get_header_value("Content-Range"), "bytes */1000") << range;
  }
  // An unparsable Range is the library's 416, with the JSON body.
  expect_error(c.Get(path, {{"Range", "bytes=x-y"}}), 416);
  // A cached copy is revalidated through the ETag.
  const auto cached = c.Get(path, {{"If-None-Match", "\"etag-" + id + "\""}});
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->status, 304);
  EXPECT_TRUE(cached->body.empty());
  expect_error(c.Get(path + "?variant=spritesheet"), 400, "invalid_value", "variant");
}

TEST_F(Routes, ThumbnailIsServedAsPngWithItsOwnEtagAndRanges) {
  start();
  auto c = client();
  const std::string id = create()["id"];
  const std::string path = "/v1/videos/" + id + "/content?variant=thumbnail";
  expect_error(c.Get(path), 409, "video_not_ready");
  const std::string png = "\x89PNG\r\n\x1a\n" + bytes_of(200);
  service().complete(id, bytes_of(1000), png);

  const auto whole = c.Get(path);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 200);
  EXPECT_EQ(whole->body, png);
  EXPECT_EQ(whole->get_header_value("Content-Type"), "image/png");
  EXPECT_EQ(whole->get_header_value("Accept-Ranges"), "bytes");
  EXPECT_EQ(whole->get_header_value("ETag"), "\"thumbnail-etag-" + id + "\"");
  const auto part = c.Get(path, {{"Range", "bytes=0-7"}});
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 206);
  EXPECT_EQ(part->body, png.substr(0, 8));
  EXPECT_EQ(part->get_header_value("Content-Range"), "bytes 0-7/" + std::to_string(png.size()));
  const auto cached = c.Get(path, {{"If-None-Match", "\"thumbnail-etag-" + id + "\""}});
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->status, 304);
  // The video's ETag does not revalidate the thumbnail.
  const auto other = c.Get(path, {{"If-None-Match", "\"etag-" + id + "\""}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  // variant=video is the MP4.
  const auto video = c.Get("/v1/videos/" + id + "/content?variant=video");
  ASSERT_TRUE(video);
  EXPECT_EQ(video->get_header_value("Content-Type"), "video/mp4");
  EXPECT_EQ(video->body, bytes_of(1000));

  // A job completed without a thumbnail (by an older server) says so, naming the variant.
  const std::string old_id = create()["id"];
  service().complete(old_id, bytes_of(10));
  expect_error(c.Get("/v1/videos/" + old_id + "/content?variant=thumbnail"), 404,
               "thumbnail_not_found", "variant");
  EXPECT_EQ(c.Get("/v1/videos/" + old_id + "/content")->status, 200);

  ASSERT_EQ(c.Delete("/v1/videos/" + id)->status, 200);
  expect_error(c.Get(path), 404, "not_found");

  // A service that makes no thumbnails says so whatever the job's state, as a 400 naming the
  // variant; the video is unaffected.
  service().makes_thumbnails = false;
  const std::string queued = create()["id"];
  expect_error(c.Get("/v1/videos/" + queued + "/content?variant=thumbnail"), 400,
               "unsupported_variant", "variant");
  expect_error(c.Get("/v1/videos/" + old_id + "/content?variant=thumbnail"), 400,
               "unsupported_variant", "variant");
  EXPECT_EQ(c.Get("/v1/videos/" + old_id + "/content")->status, 200);
}

TEST_F(Routes, ErrorsSentWithARangeHeaderStayWholeJson) {
  start();
  auto c = client();
  const std::string id = create()["id"];
  const httplib::Headers range = {{"Range", "bytes=0-4"}};
  const auto not_ready = c.Get("/v1/videos/" + id + "/content", range);
  expect_error(not_ready, 409, "video_not_ready");
  // The SDKs would otherwise retry a 409.
  EXPECT_EQ(not_ready->get_header_value("x-should-retry"), "false");
  expect_error(c.Get("/v1/videos/video_" + std::string(32, 'b') + "/content", range), 404);
  expect_error(c.Get("/v1/videos/nope/content", range), 404);
  // Ranges apply to content only: a JSON response with a Range header comes whole.
  const auto got = c.Get("/v1/videos/" + id, range);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_TRUE(json::parse(got->body, nullptr, false).is_object()) << got->body;
}

// Reads an event stream on its own thread, keeping what arrived so far.
class StreamReader {
 public:
  StreamReader(int port, std::string path) {
    thread_ = std::thread([this, port, path = std::move(path)] {
      httplib::Client c("127.0.0.1", port);
      c.set_read_timeout(std::chrono::seconds(30));
      const auto r = c.Get(path, [&](const char* data, size_t n) {
        std::lock_guard lock(mu_);
        text_.append(data, n);
        return true;
      });
      std::lock_guard lock(mu_);
      status_ = r ? r->status : -1;
      ended_ = true;
    });
  }
  ~StreamReader() {
    if (thread_.joinable()) thread_.join();
  }
  std::string text() {
    std::lock_guard lock(mu_);
    return text_;
  }
  bool ended() {
    std::lock_guard lock(mu_);
    return ended_;
  }
  int status() {
    std::lock_guard lock(mu_);
    return status_;
  }
  bool has(const std::string& s) { return text().find(s) != std::string::npos; }

 private:
  std::mutex mu_;
  std::string text_;
  bool ended_ = false;
  int status_ = 0;
  std::thread thread_;
};

TEST_F(Routes, EventsGiveTheStateThenEachChangeThenTheEndThenClose) {
  start();
  const std::string id = create()["id"];
  StreamReader events(http_->port(), "/v1/videos/" + id + "/events");
  ASSERT_TRUE(wait_until([&] { return events.has("\"status\":\"queued\""); })) << events.text();
  EXPECT_TRUE(events.has("event: video.updated"));
  service().set_state(id, JobStatus::InProgress, 40);
  ASSERT_TRUE(wait_until([&] { return events.has("\"progress\":40"); })) << events.text();
  service().set_state(id, JobStatus::InProgress, 70);
  ASSERT_TRUE(wait_until([&] { return events.has("\"progress\":70"); })) << events.text();
  EXPECT_FALSE(events.ended());
  service().complete(id, bytes_of(10));
  ASSERT_TRUE(wait_until([&] { return events.ended(); })) << events.text();
  EXPECT_EQ(events.status(), 200);
  const std::string text = events.text();
  const auto queued = text.find("\"status\":\"queued\"");
  const auto p40 = text.find("\"progress\":40");
  const auto p70 = text.find("\"progress\":70");
  const auto done = text.find("event: video.completed");
  ASSERT_NE(done, std::string::npos) << text;
  EXPECT_LT(queued, p40);
  EXPECT_LT(p40, p70);
  EXPECT_LT(p70, done);
  // Each event is one JSON Video on its data line.
  const auto data = text.find("data: ", done);
  ASSERT_NE(data, std::string::npos);
  const json last = json::parse(text.substr(data + 6, text.find('\n', data) - data - 6));
  EXPECT_EQ(last["status"], "completed");
  EXPECT_EQ(last["progress"], 100);
}

TEST_F(Routes, EventsPingWhileNothingChangesAndEndWhenTheJobGoes) {
  RouteOptions ro;
  ro.sse_ping_interval = std::chrono::milliseconds(100);
  ro.poll_interval = std::chrono::milliseconds(20);
  start({}, ro);
  auto c = client();
  const std::string id = create()["id"];
  StreamReader events(http_->port(), "/v1/videos/" + id + "/events");
  ASSERT_TRUE(wait_until([&] { return events.has(": ping\n\n"); })) << events.text();
  EXPECT_EQ(c.Delete("/v1/videos/" + id)->status, 200);
  ASSERT_TRUE(wait_until([&] { return events.ended(); })) << events.text();
  EXPECT_TRUE(events.has("event: video.deleted"));
}

TEST_F(Routes, EventStreamsAreCappedAndEndWhenTheServiceStops) {
  RouteOptions ro;
  ro.max_event_streams = 1;
  ro.poll_interval = std::chrono::milliseconds(20);
  start({}, ro);
  auto c = client();
  const std::string id = create()["id"];
  StreamReader first(http_->port(), "/v1/videos/" + id + "/events");
  ASSERT_TRUE(wait_until([&] { return first.has("event: video.updated"); }));
  const auto second = c.Get("/v1/videos/" + id + "/events");
  expect_error(second, 429, "too_many_requests");
  EXPECT_EQ(second->get_header_value("Retry-After"), "5");
  service().stop();
  ASSERT_TRUE(wait_until([&] { return first.ended(); })) << first.text();
  EXPECT_TRUE(first.has("event: server.shutdown"));
  // The slot is free again once the first stream ended.
  const std::string other = create()["id"];
  service().complete(other, "x");
  const auto third = c.Get("/v1/videos/" + other + "/events");
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 200);
  expect_error(c.Get("/v1/videos/video_" + std::string(32, 'c') + "/events"), 404);
}

TEST_F(Routes, AStoppingServerEndsItsEventStreams) {
  RouteOptions ro;
  ro.poll_interval = std::chrono::milliseconds(20);
  start({}, ro);
  const std::string id = create()["id"];
  StreamReader events(http_->port(), "/v1/videos/" + id + "/events");
  ASSERT_TRUE(wait_until([&] { return events.has("event: video.updated"); }));
  const auto t0 = Clock::now();
  http_->stop();
  thread_.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_TRUE(wait_until([&] { return events.ended(); }));
}

TEST_F(Routes, AFullQueueIs429WithRetryAfter) {
  start();
  service().queue_full = true;
  auto c = client();
  const auto r = c.Post("/v1/videos", R"({"prompt":"x"})", "application/json");
  expect_error(r, 429, "queue_full");
  EXPECT_EQ(r->get_header_value("Retry-After"), "7");
}

TEST_F(Routes, CancelKeepsTheJobAndASecondCancelIs409) {
  start();
  auto c = client();
  const std::string id = create()["id"];
  const auto r = c.Post("/v1/videos/" + id + "/cancel");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["status"], "cancelled");
  const auto again = c.Post("/v1/videos/" + id + "/cancel");
  expect_error(again, 409, "video_finished");
  EXPECT_EQ(again->get_header_value("x-should-retry"), "false");
  EXPECT_EQ(json::parse(c.Get("/v1/videos/" + id)->body)["status"], "cancelled");
  expect_error(c.Post("/v1/videos/video_" + std::string(32, 'd') + "/cancel"), 404);
}

TEST_F(Routes, SyncWaitsAndReturnsTheVideo) {
  RouteOptions ro;
  ro.poll_interval = std::chrono::milliseconds(20);
  start({}, ro);
  const std::string body = bytes_of(300);
  std::atomic<bool> worked{false};
  std::thread worker([&] {
    if (!wait_until([&] { return !service().ids().empty(); })) return;
    const std::string id = service().ids().front();
    service().set_state(id, JobStatus::InProgress, 50);
    service().complete(id, body);
    worked = true;
  });
  auto c = client();
  const httplib::MultipartFormDataItems items = {{"prompt", "a cat", "", ""}};
  const auto r = c.Post("/v1/videos/sync", items);
  worker.join();
  ASSERT_TRUE(worked.load());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "video/mp4");
  EXPECT_EQ(r->get_header_value("X-Video-Id"), service().ids().front());
  EXPECT_EQ(r->body, body);
}

TEST_F(Routes, SyncTimesOutNamingTheJobAndReportsAFailure) {
  RouteOptions ro;
  ro.poll_interval = std::chrono::milliseconds(20);
  start({}, ro);
  auto c = client();
  const auto slow =
      c.Post("/v1/videos/sync?timeout_s=1", R"({"prompt":"a cat"})", "application/json");
  expect_error(slow, 504, "timeout");
  ASSERT_EQ(service().ids().size(), 1u);
  EXPECT_NE(slow->body.find(service().ids().front()), std::string::npos) << slow->body;
  expect_error(c.Post("/v1/videos/sync?timeout_s=0", R"({"prompt":"x"})", "application/json"), 400,
               "invalid_value", "timeout_s");

  std::thread worker([&] {
    wait_until([&] { return service().ids().size() == 2; });
    for (const auto& id : service().ids())
      if (service().get(id)->status == JobStatus::Queued)
        service().set_state(id, JobStatus::Failed, 10);
  });
  const auto failed = c.Post("/v1/videos/sync", R"({"prompt":"a dog"})", "application/json");
  worker.join();
  expect_error(failed, 500, "generation_error");
  EXPECT_NE(failed->body.find("it broke"), std::string::npos) << failed->body;
}

TEST_F(Routes, ModelsReadyMetricsAndHealth) {
  start();
  auto c = client();
  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "ltx-demo");
  EXPECT_TRUE(models->has_header("x-request-id"));
  const auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->body, R"({"status":"ok"})");
  EXPECT_EQ(c.Get("/ready")->status, 200);
  service().ready = false;
  const auto loading = c.Get("/ready");
  ASSERT_TRUE(loading);
  EXPECT_EQ(loading->status, 503);
  EXPECT_EQ(json::parse(loading->body)["status"], "loading");
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  EXPECT_NE(metrics->body.find("ltx_queue_depth"), std::string::npos);
}

TEST_F(Routes, MetricsCountResponsesByRouteWithIdsFolded) {
  start();
  auto c = client();
  for (int i = 0; i < 3; ++i) c.Get("/v1/videos/video_" + std::string(32, 'e'));
  c.Get("/v1/videos/../../etc/passwd");
  const std::string expected =
      R"(ltx_http_requests_total{method="GET",route="/v1/videos/{id}",code="404"} 3)";
  // A response is counted once it is written, so the count may trail the client by a moment.
  std::string text;
  EXPECT_TRUE(wait_until([&] {
    text = c.Get("/metrics")->body;
    return text.find(expected) != std::string::npos;
  })) << text;
  EXPECT_NE(text.find("# TYPE ltx_http_requests_total counter"), std::string::npos);
  EXPECT_NE(text.find(R"(route="other",code="404")"), std::string::npos) << text;
  EXPECT_EQ(text.find("passwd"), std::string::npos) << text;
}

TEST(RouteOptionsCheck, StreamsAndSyncWaitsMustLeaveThreadsFree) {
  HttpOptions o;
  o.threads = 8;
  HttpServer http(o);
  test::InMemoryVideoService service("/nonexistent");
  RouteOptions ro;
  ro.max_event_streams = 6;
  ro.max_sync_waits = 2;
  try {
    add_routes(http, service, ro);
    FAIL() << "accepted streams + sync waits that take every thread";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--http-threads"), std::string::npos) << e.what();
  }
}

TEST_F(Routes, AnUnexpectedExceptionIsA500ThatKeepsItsDetailsInTheLog) {
  start();
  service().models_throw = true;
  const auto r = client().Get("/v1/models");
  expect_error(r, 500, "internal_error");
  EXPECT_EQ(r->body.find("secret internal detail"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(r->get_header_value("x-request-id")), std::string::npos) << r->body;
}

TEST_F(Routes, ThePageIsServedFromTheBinaryWithItsPolicy) {
  start();
  auto c = client();
  const auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->get_header_value("Content-Security-Policy"), "default-src 'self'");
  EXPECT_NE(page->body.find("<video"), std::string::npos);
  EXPECT_NE(page->body.find("/assets/app.js"), std::string::npos);
  for (const auto& [name, type] : std::vector<std::pair<std::string, std::string>>{
           {"app.js", "text/javascript; charset=utf-8"},
           {"style.css", "text/css; charset=utf-8"}}) {
    const auto r = c.Get("/assets/" + name);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << name;
    EXPECT_EQ(r->get_header_value("Content-Type"), type);
    const std::string etag = r->get_header_value("ETag");
    EXPECT_EQ(etag.size(), 66u) << etag;  // the quoted sha256
    const auto again = c.Get("/assets/" + name, {{"If-None-Match", etag}});
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 304);
  }
  expect_error(c.Get("/assets/nope.js"), 404);
  expect_error(c.Get("/assets/../CMakeLists.txt"), 404);
}

TEST_F(Routes, TwentyConcurrentClientsCreatePollAndDownload) {
  HttpOptions o;
  o.threads = 32;
  start(o);
  std::atomic<bool> done{false};
  // A worker that finishes every queued job after a short while.
  std::thread worker([&] {
    while (!done) {
      for (const auto& id : service().ids()) {
        const auto job = service().get(id);
        if (job && job->status == JobStatus::Queued) service().complete(id, "MP4:" + id);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 20; ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", http_->port());
      c.set_read_timeout(std::chrono::seconds(30));
      const auto r = c.Post("/v1/videos", json{{"prompt", "clip " + std::to_string(i)}}.dump(),
                            "application/json");
      if (!r || r->status != 200) {
        ADD_FAILURE() << "create: " << (r ? r->body : httplib::to_string(r.error()));
        return;
      }
      const std::string id = json::parse(r->body)["id"];
      while (Clock::now() < deadline) {
        const auto g = c.Get("/v1/videos/" + id);
        if (!g || g->status != 200) {
          ADD_FAILURE() << "get: " << (g ? g->body : httplib::to_string(g.error()));
          return;
        }
        if (json::parse(g->body)["status"] == "completed") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      const auto content = c.Get("/v1/videos/" + id + "/content");
      if (content && content->status == 200 && content->body == "MP4:" + id) {
        ++ok;
      } else {
        ADD_FAILURE() << "content: "
                      << (content ? content->body : httplib::to_string(content.error()));
      }
    });
  }
  for (auto& t : clients) t.join();
  done = true;
  worker.join();
  EXPECT_EQ(ok.load(), 20);
  EXPECT_LT(Clock::now(), deadline);
}

TEST(RangeFix, ClampsChecksAndDropsRanges) {
  struct Case {
    ByteRanges in;
    RangeFix fix;
    ByteRanges out;
  };
  const std::vector<Case> cases = {
      {{}, RangeFix::Satisfiable, {}},
      {{{0, 99}}, RangeFix::Satisfiable, {{0, 99}}},
      {{{100, -1}}, RangeFix::Satisfiable, {{100, 999}}},
      {{{-1, 100}}, RangeFix::Satisfiable, {{-1, 100}}},
      {{{-1, 5000}}, RangeFix::Satisfiable, {{-1, 1000}}},
      {{{900, 5000}}, RangeFix::Satisfiable, {{900, 999}}},
      {{{999, 999}}, RangeFix::Satisfiable, {{999, 999}}},
      {{{-1, -1}}, RangeFix::Satisfiable, {}},
      {{{0, 9}, {20, 29}}, RangeFix::Satisfiable, {}},
      {{{1000, -1}}, RangeFix::NotSatisfiable, {}},
      {{{1000, 2000}}, RangeFix::NotSatisfiable, {}},
      {{{-1, 0}}, RangeFix::NotSatisfiable, {}},
  };
  for (const Case& k : cases) {
    ByteRanges r = k.in;
    EXPECT_EQ(fix_content_ranges(r, 1000), k.fix);
    EXPECT_EQ(r, k.out);
  }
  ByteRanges empty_file = {{0, -1}};
  EXPECT_EQ(fix_content_ranges(empty_file, 0), RangeFix::NotSatisfiable);
}

TEST(ConstantTimeEqual, ComparesWholeStrings) {
  EXPECT_TRUE(constant_time_equal("abc", "abc"));
  EXPECT_TRUE(constant_time_equal("", ""));
  EXPECT_FALSE(constant_time_equal("abc", "abd"));
  EXPECT_FALSE(constant_time_equal("abc", "ab"));
  EXPECT_FALSE(constant_time_equal("ab", "abc"));
  EXPECT_FALSE(constant_time_equal("", "a"));
  EXPECT_FALSE(constant_time_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(HttpOptionsCheck, ImpossibleOptionsNameTheirFlag) {
  HttpOptions o;
  o.threads = 0;
  try {
    HttpServer s(o);
    FAIL() << "accepted 0 threads";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--http-threads"), std::string::npos) << e.what();
  }
  o.threads = 4;
  o.max_body_bytes = 0;
  try {
    HttpServer s(o);
    FAIL() << "accepted a 0-byte body limit";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("--max-body-bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ltx::server::http_routes_test
