// `ltx serve` as an operator runs it: the binary on the demo bundle, over loopback HTTP, through
// kill -9, SIGTERM and restarts on the same data dir, and many jobs in a row.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "generate/generate_test_util.h"
#include "media/support.h"
#include "server/data_dir.h"
#include "server/serve_process.h"
#include "support/cli_runner.h"

namespace ltx::test::serve_process_test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A tiny one-stage demo job: 64x64, 9 frames, `steps` steps.
json tiny_job(const std::string& prompt, int steps = 2) {
  return {{"prompt", prompt}, {"pipeline", "one-stage"}, {"width", 64}, {"height", 64},
          {"num_frames", 9},  {"num_inference_steps", steps}};
}

json wait_done(const ServeProcess& s, const std::string& id, std::chrono::seconds timeout = 120s) {
  return ltx::test::wait_done(s, id, timeout);
}

std::string content(const ServeProcess& s, const std::string& id) {
  auto r = s.client().Get("/v1/videos/" + id + "/content");
  EXPECT_TRUE(r);
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  return r->status == 200 ? r->body : std::string();
}

// A short stand-in for a video's bytes in failure messages.
std::string digest(const std::string& bytes) {
  return std::to_string(bytes.size()) + " bytes, sha256 " + server::sha256_hex(bytes);
}

std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.path().string().find(".tmp") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// A data dir that cannot be made is reported at start-up, before any model loads (no demo bundle
// is written), naming the flag and the part of the path at fault.
TEST(ServeProcess, AnUnusableDataDirFailsBeforeAnyModelLoads) {
  TempDir dir;
  const std::string file = dir.file("notes.txt");
  write_bytes(file, "a file, not a folder");
  setenv("XDG_CACHE_HOME", dir.file("cache").c_str(), 1);
  for (const std::string& data : {file, file + "/data"}) {
    const CliResult r = run_ltx(dir, {"serve", "--port", "0", "--data-dir", data});
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("--data-dir: cannot write '"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'" + file + "' is a file, not a folder"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("cache/ltx"))) << "a model was prepared first";
}

TEST(ServeProcess, DemoRoundTrip) {
  TempDir dir;
  ServeProcess s(dir.file("data"), dir.file("cache"), dir.file("serve.log"));
  s.start();
  ASSERT_TRUE(wait_until([&] { auto r = s.client().Get("/ready"); return r && r->status == 200; },
                         60s))
      << s.log();
  const auto models = s.client().Get("/v1/models");
  ASSERT_TRUE(models);
  const json m = json::parse(models->body);
  ASSERT_EQ(m["data"].size(), 1u) << models->body;
  EXPECT_EQ(m["data"][0]["demo"], true) << models->body;

  const json job = create_job(s, tiny_job("a red ball bouncing"));
  ASSERT_EQ(job["status"], "queued") << job.dump();
  EXPECT_NE(job["model"].get<std::string>().find("demo"), std::string::npos) << job.dump();
  const json done = wait_done(s, job["id"]);
  ASSERT_EQ(done["status"], "completed") << done.dump() << s.log();
  EXPECT_EQ(done["progress"], 100);
  EXPECT_EQ(done["size"], "64x64");
  const std::string mp4 = content(s, job["id"]);
  ASSERT_GT(mp4.size(), 8u);
  EXPECT_EQ(mp4.substr(4, 4), "ftyp");
  if (mp4_check_unavailable().empty()) {
    write_bytes(dir.file("out.mp4"), mp4);
    expect_mp4(dir.file("out.mp4"), 64, 64, 9, "24/1", 48000);
  }

  // The thumbnail: a PNG of the video's size, with an ETag of its own; deleting the job removes it.
  const std::string id = job["id"];
  const std::string thumbnail_file = dir.file("data/outputs/" + id + ".png");
  auto thumb = s.client().Get("/v1/videos/" + id + "/content?variant=thumbnail");
  ASSERT_TRUE(thumb);
  if (media::image_io_available()) {
    ASSERT_EQ(thumb->status, 200) << thumb->body;
    EXPECT_EQ(thumb->get_header_value("Content-Type"), "image/png");
    const std::string& png = thumb->body;
    ASSERT_GT(png.size(), 24u);
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_EQ(png.substr(12, 4), "IHDR");
    const auto be32 = [&](size_t at) {
      return (static_cast<uint32_t>(static_cast<uint8_t>(png[at])) << 24) |
             (static_cast<uint32_t>(static_cast<uint8_t>(png[at + 1])) << 16) |
             (static_cast<uint32_t>(static_cast<uint8_t>(png[at + 2])) << 8) |
             static_cast<uint32_t>(static_cast<uint8_t>(png[at + 3]));
    };
    EXPECT_EQ(be32(16), 64u);  // width
    EXPECT_EQ(be32(20), 64u);  // height
    const std::string etag = thumb->get_header_value("ETag");
    EXPECT_EQ(etag, "\"" + server::sha256_hex(png) + "\"");
    EXPECT_NE(etag, s.client().Get("/v1/videos/" + id + "/content")->get_header_value("ETag"));
    EXPECT_TRUE(std::filesystem::exists(thumbnail_file));
  } else {
    EXPECT_EQ(thumb->status, 400) << thumb->body;
    EXPECT_EQ(json::parse(thumb->body)["error"]["code"], "unsupported_variant") << thumb->body;
  }
  auto del = s.client().Delete("/v1/videos/" + id);
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200) << del->body;
  EXPECT_FALSE(std::filesystem::exists(dir.file("data/outputs/" + id + ".mp4")));
  EXPECT_FALSE(std::filesystem::exists(thumbnail_file));
  EXPECT_EQ(s.terminate(), 0) << s.log();
}

// A running job deleted: gone from the API at once, stopped at its next step, no file left; the
// engine runs the next job as usual. A full queue answers 429 with Retry-After.
TEST(ServeProcess, DeleteStopsARunningJobAndAFullQueueAnswers429) {
  TempDir dir;
  ServeProcess s(dir.file("data"), dir.file("cache"), dir.file("serve.log"), {"--max-queue", "1"});
  s.start();
  const std::string running = create_job(s, tiny_job("runs long", 100000))["id"];
  ASSERT_TRUE(wait_until([&] { return get_job(s, running).value("progress", 0) > 0; }, 120s))
      << s.log();
  const std::string queued = create_job(s, tiny_job("waits"))["id"];
  auto full = s.client().Post("/v1/videos", tiny_job("one too many").dump(), "application/json");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 429) << full->body;
  EXPECT_FALSE(full->get_header_value("Retry-After").empty());
  EXPECT_EQ(json::parse(full->body)["error"]["type"], "rate_limit_error") << full->body;

  auto del = s.client().Delete("/v1/videos/" + running);
  ASSERT_TRUE(del);
  ASSERT_EQ(del->status, 200) << del->body;
  EXPECT_EQ(json::parse(del->body),
            (json{{"id", running}, {"object", "video.deleted"}, {"deleted", true}}));
  auto gone = s.client().Get("/v1/videos/" + running);
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, 404);
  // The queued job runs once the deleted one has stopped.
  EXPECT_EQ(wait_done(s, queued)["status"], "completed") << s.log();
  EXPECT_FALSE(std::filesystem::exists(dir.file("data/outputs/" + running + ".mp4")));
  EXPECT_EQ(temporaries(dir.file("data")), std::vector<std::string>{});
  // The counters moved, and the page carries the device's memory.
  auto metrics = s.client().Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("ltx_jobs_total{outcome=\"completed\"} 1"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("ltx_device_memory_bytes{kind=\"live\"}"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("ltx_step_duration_seconds_count{stage=\"stage 1\"}"),
            std::string::npos)
      << metrics->body;
  EXPECT_EQ(s.terminate(), 0);
}

// With a key: every endpoint but /health wants it; bad requests get OpenAI-shaped errors.
TEST(ServeProcess, ApiKeyAndBadRequests) {
  TempDir dir;
  ServeProcess s(dir.file("data"), dir.file("cache"), dir.file("serve.log"),
                 {"--api-key", "sesame-42"});
  s.start();
  auto c = s.client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/v1/models")->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer wrong"}})->status, 401);
  const httplib::Headers key = {{"Authorization", "Bearer sesame-42"}};
  EXPECT_EQ(c.Get("/v1/models", key)->status, 200);
  const auto error_of = [&](const httplib::Result& r, int status) {
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, status) << r->body;
    const json j = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(j.contains("error")) << r->body;
    return j.value("error", json::object());
  };
  EXPECT_EQ(error_of(c.Post("/v1/videos", key, R"({"seed": 1})", "application/json"), 400)["param"],
            "prompt");
  EXPECT_NE(error_of(c.Post("/v1/videos", key, R"({"prompt": "x", "colour": "red"})",
                            "application/json"),
                     422)["message"]
                .get<std::string>()
                .find("colour"),
            std::string::npos);
  const httplib::MultipartFormDataItems not_an_image = {
      {"prompt", "a cat", "", ""}, {"input_reference", "hello, world", "cat.png", "image/png"}};
  EXPECT_EQ(error_of(c.Post("/v1/videos", key, not_an_image), 422)["param"], "input_reference");
  error_of(c.Get("/v1/videos/video_ZZ", key), 404);
  error_of(c.Get("/v1/videos/..%2F..%2Fetc%2Fpasswd", key), 404);
  EXPECT_EQ(s.terminate(), 0);
}

// The second job of the same shape loads nothing: the log's time-to-first-step line says so.
TEST(ServeProcess, TheSecondJobLoadsNoModel) {
  TempDir dir;
  ServeProcess s(dir.file("data"), dir.file("cache"), dir.file("serve.log"));
  s.start();
  const json a = create_job(s, tiny_job("first"));
  ASSERT_EQ(wait_done(s, a["id"])["status"], "completed") << s.log();
  const json b = create_job(s, tiny_job("second"));
  ASSERT_EQ(wait_done(s, b["id"])["status"], "completed") << s.log();
  EXPECT_EQ(s.terminate(), 0);
  const std::string log = s.log();
  // Each job ran once.
  for (const json& j : {a, b}) {
    const std::string mark = "job " + j["id"].get<std::string>() + " ttfs";
    const size_t first = log.find(mark);
    ASSERT_NE(first, std::string::npos) << log;
    EXPECT_EQ(log.find(mark, first + 1), std::string::npos) << "ran twice:\n" << log;
  }
  const size_t line = log.find("job " + b["id"].get<std::string>() + " ttfs");
  ASSERT_NE(line, std::string::npos) << log;
  const std::string text = log.substr(line, log.find('\n', line) - line);
  EXPECT_NE(text.find("loads 0"), std::string::npos) << text;
}

// kill -9 in the middle of a job, then a restart on the same data dir: the finished job keeps its
// bytes, the interrupted one runs again and completes, the queued one runs, nothing is left behind.
TEST(ServeProcess, KillNineMidJobLosesNothing) {
  TempDir dir;
  const std::string data = dir.file("data");
  std::string done_id, cut_id, queued_id, done_bytes;
  {
    ServeProcess s(data, dir.file("cache"), dir.file("serve1.log"));
    s.start();
    const json a = create_job(s, tiny_job("finished before the crash"));
    done_id = a["id"];
    ASSERT_EQ(wait_done(s, done_id)["status"], "completed") << s.log();
    done_bytes = content(s, done_id);
    cut_id = create_job(s, tiny_job("cut by the crash", 100))["id"];
    queued_id = create_job(s, tiny_job("queued at the crash"))["id"];
    ASSERT_TRUE(wait_until(
        [&] {
          const json v = get_job(s, cut_id);
          return v.value("status", "") == "in_progress" && v.value("progress", 0) > 0;
        },
        120s))
        << s.log();
    s.kill9();
  }
  ServeProcess s(data, dir.file("cache"), dir.file("serve2.log"));
  s.start();
  EXPECT_EQ(digest(content(s, done_id)), digest(done_bytes)) << s.log();
  const json cut = wait_done(s, cut_id, 300s);
  EXPECT_EQ(cut["status"], "completed") << cut.dump() << s.log();
  EXPECT_EQ(wait_done(s, queued_id)["status"], "completed") << s.log();
  EXPECT_EQ(content(s, cut_id).substr(4, 4), "ftyp");
  EXPECT_EQ(s.terminate(), 0);
  EXPECT_EQ(temporaries(data), std::vector<std::string>{});
}

// SIGTERM while a job runs: the server stops (exit 0) without finishing it, and the job completes
// after the next start.
TEST(ServeProcess, SigtermMidJobExitsZeroAndTheJobRunsAfterARestart) {
  TempDir dir;
  const std::string data = dir.file("data");
  std::string id;
  {
    ServeProcess s(data, dir.file("cache"), dir.file("serve1.log"), {"--shutdown-grace", "0"});
    s.start();
    id = create_job(s, tiny_job("interrupted by SIGTERM", 100))["id"];
    ASSERT_TRUE(wait_until([&] { return get_job(s, id).value("progress", 0) > 0; }, 120s))
        << s.log();
    EXPECT_EQ(s.terminate(), 0) << s.log();
  }
  ServeProcess s(data, dir.file("cache"), dir.file("serve2.log"));
  s.start();
  EXPECT_EQ(wait_done(s, id, 300s)["status"], "completed") << s.log();
  EXPECT_EQ(s.terminate(), 0);
}

// Twenty clients at once, each creating a job, polling it and downloading its video.
TEST(ServeProcess, TwentyConcurrentClients) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "twenty demo jobs take minutes under a sanitizer; the routes' twenty-client test "
                  "(Routes.*) runs there";
#endif
  TempDir dir;
  ServeProcess s(dir.file("data"), dir.file("cache"), dir.file("serve.log"), {"--max-queue", "32"});
  s.start();
  std::vector<std::thread> clients;
  std::vector<std::string> outcome(20);
  for (int i = 0; i < 20; ++i)
    clients.emplace_back([&, i] {
      const json j = create_job(s, tiny_job("client " + std::to_string(i), 1));
      if (!j.contains("id")) return;
      const json done = wait_done(s, j["id"], 300s);
      const std::string mp4 = done.value("status", "") == "completed" ? content(s, j["id"]) : "";
      outcome[static_cast<size_t>(i)] = mp4.size() > 8 ? mp4.substr(4, 4) : done.dump();
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(outcome[static_cast<size_t>(i)], "ftyp") << i;
  EXPECT_EQ(s.terminate(), 0);
}

// Fifty jobs one after another: the server's memory settles (no growth per job beyond noise).
TEST(ServeProcess, FiftySequentialJobsKeepMemoryBounded) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's own bookkeeping (ASan's quarantine, TSan's shadow) grows the "
                  "resident set; the release build checks the server's";
#endif
  TempDir dir;
  ServeProcess s(dir.file("data"), dir.file("cache"), dir.file("serve.log"));
  s.start();
  int64_t rss_after_warmup = 0;
  for (int i = 0; i < 50; ++i) {
    const json j = create_job(s, tiny_job("job " + std::to_string(i), 1));
    ASSERT_EQ(wait_done(s, j["id"])["status"], "completed") << i << s.log();
    if (i == 4) rss_after_warmup = s.rss_kib();
  }
  const int64_t rss_end = s.rss_kib();
  ASSERT_GT(rss_after_warmup, 0);
  EXPECT_LT(rss_end - rss_after_warmup, 64 * 1024)
      << "RSS grew from " << rss_after_warmup << " KiB to " << rss_end << " KiB";
  EXPECT_EQ(s.terminate(), 0);
}

}  // namespace
}  // namespace ltx::test::serve_process_test
