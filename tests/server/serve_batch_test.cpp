// Batching through `ltx serve`: jobs of one shape that queue behind a running job run as one
// batch (up to --max-batch; the log and /metrics say so), each MP4 holds what the same job gets
// alone under --max-batch 1 (the same MP4 bytes), and jobs of other shapes never join the batch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/data_dir.h"
#include "server/serve_process.h"

namespace ltx::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A tiny one-stage demo job: 64x64, 9 frames, `steps` steps.
json tiny_job(const std::string& prompt, int64_t seed, double guidance, int steps = 2) {
  return {{"prompt", prompt},          {"pipeline", "one-stage"}, {"width", 64},
          {"height", 64},              {"num_frames", 9},         {"num_inference_steps", steps},
          {"seed", seed},              {"guidance_scale", guidance}};
}

std::string status_of(const ServeProcess& s, const std::string& id) {
  return get_job(s, id).value("status", "");
}

// The job's MP4, saved as `path`.
void save_content(const ServeProcess& s, const std::string& id, const std::string& path) {
  auto r = s.client().Get("/v1/videos/" + id + "/content");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  write_bytes(path, r->body);
}

// The /metrics line that starts with `prefix` (its value), or "" when there is none.
std::string metric(const ServeProcess& s, const std::string& prefix) {
  auto r = s.client().Get("/metrics");
  if (!r) return {};
  size_t at = r->body.find("\n" + prefix + " ");
  if (at == std::string::npos) return {};
  at += prefix.size() + 2;
  return r->body.substr(at, r->body.find('\n', at) - at);
}

// The four jobs of the batch: other prompts, seeds and guidance scales, one shape.
std::vector<json> batch_jobs() {
  return {tiny_job("a red ball", 1, 3.0), tiny_job("waves crashing on rocks at night", 22, 4.5),
          tiny_job("a cat", 333, 2.0), tiny_job("rain on a city street", 4444, 6.0)};
}

TEST(ServeBatch, QueuedJobsOfOneShapeRunAsOneBatchAndMatchTheirSoloRuns) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "two servers and ten demo jobs take minutes under a sanitizer; the engine's "
                  "batches (EngineBatch.*) and the cancel-in-batch test run there";
#endif
  TempDir dir;
  ServeProcess batched(dir.file("batched"), dir.file("cache"), dir.file("batched.log"),
                       {"--max-batch", "4"});
  batched.start();
  // A first, longer job keeps the worker busy while the others queue behind it.
  const json blocker = create_job(batched, tiny_job("the blocker", 9, 3.0, 12));
  ASSERT_TRUE(wait_until([&] { return status_of(batched, blocker["id"]) != "queued"; }, 60s))
      << batched.log();
  std::vector<std::string> ids;
  for (const json& body : batch_jobs()) ids.push_back(create_job(batched, body)["id"]);
  // A fifth job of the shape waits for the next run (--max-batch 4); one of another shape never
  // joins a batch of these.
  const std::string fifth = create_job(batched, tiny_job("a fifth", 5, 3.0))["id"];
  json other_body = tiny_job("another shape", 6, 3.0);
  other_body["width"] = 96;
  const std::string other = create_job(batched, other_body)["id"];
  ASSERT_EQ(status_of(batched, blocker["id"]), "in_progress")
      << "the first job ended before the others queued; make it longer\n" << batched.log();

  std::vector<std::string> all = ids;
  all.insert(all.end(), {blocker["id"], fifth, other});
  ASSERT_TRUE(wait_until(
      [&] {
        for (const std::string& id : all)
          if (!is_ended(status_of(batched, id))) return false;
        return true;
      },
      300s))
      << batched.log();
  for (const std::string& id : all) ASSERT_EQ(status_of(batched, id), "completed") << id;
  for (size_t i = 0; i < ids.size(); ++i)
    save_content(batched, ids[i], dir.file("batched_" + std::to_string(i) + ".mp4"));
  // Runs: the blocker, the batch of four, the fifth, the other shape.
  EXPECT_EQ(metric(batched, "ltx_batch_size_count"), "4");
  EXPECT_EQ(metric(batched, "ltx_batch_size_sum"), "7");
  EXPECT_EQ(metric(batched, "ltx_batch_size_bucket{le=\"3\"}"), "3");
  EXPECT_EQ(batched.terminate(), 0);
  const std::string log = batched.log();
  const std::string line = "batch of 4 jobs: ids " + ids[0] + ", " + ids[1] + ", " + ids[2] +
                           ", " + ids[3] + ", ";
  EXPECT_NE(log.find(line), std::string::npos) << log;
  EXPECT_EQ(log.find("batch of 4 jobs", log.find(line) + 1), std::string::npos) << log;
  for (const std::string& id : {fifth, other}) {
    const size_t at = log.find("job " + id + " ttfs");
    ASSERT_NE(at, std::string::npos) << log;
    const std::string text = log.substr(at, log.find('\n', at) - at);
    EXPECT_EQ(text.find("batch of"), std::string::npos) << text;
  }

  // The same jobs alone.
  ServeProcess alone(dir.file("alone"), dir.file("cache"), dir.file("alone.log"),
                     {"--max-batch", "1"});
  alone.start();
  std::vector<std::string> solo_ids;
  for (const json& body : batch_jobs()) solo_ids.push_back(create_job(alone, body)["id"]);
  ASSERT_TRUE(wait_until(
      [&] {
        for (const std::string& id : solo_ids)
          if (!is_ended(status_of(alone, id))) return false;
        return true;
      },
      300s))
      << alone.log();
  for (size_t i = 0; i < solo_ids.size(); ++i) {
    ASSERT_EQ(status_of(alone, solo_ids[i]), "completed") << alone.log();
    save_content(alone, solo_ids[i], dir.file("alone_" + std::to_string(i) + ".mp4"));
  }
  for (size_t i = 0; i < solo_ids.size(); ++i) {
    const std::string b = dir.file("batched_" + std::to_string(i) + ".mp4");
    const std::string a = dir.file("alone_" + std::to_string(i) + ".mp4");
    const std::string batched = read_bytes(b);
    ASSERT_FALSE(batched.empty()) << "job " << i;
    EXPECT_TRUE(batched == read_bytes(a)) << "job " << i << ": the batched MP4 is not the solo one";
    // Its batch mate's video is another one.
    const std::string mate = dir.file("alone_" + std::to_string((i + 1) % 4) + ".mp4");
    EXPECT_FALSE(batched == read_bytes(mate)) << "job " << i;
  }
  EXPECT_EQ(metric(alone, "ltx_batch_size_sum"), "4");
  EXPECT_EQ(alone.terminate(), 0);
  EXPECT_EQ(alone.log().find("batch of"), std::string::npos) << alone.log();
}


// A job cancelled while its batch runs ends cancelled with no output; its batch mates complete.
TEST(ServeBatch, ACancelledMemberEndsCancelledAndItsMatesComplete) {
  TempDir dir;
  ServeProcess s(dir.file("data"), dir.file("cache"), dir.file("serve.log"),
                 {"--max-batch", "4"});
  s.start();
  const json blocker = create_job(s, tiny_job("the blocker", 9, 3.0, 6));
  ASSERT_TRUE(wait_until([&] { return status_of(s, blocker["id"]) != "queued"; }, 60s)) << s.log();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(create_job(s, tiny_job("member " + std::to_string(i), i, 3.0, 120))["id"]);
  // The batch runs once every member is in progress and the denoising has begun; 120 steps leave
  // it far from its end when the cancel comes, even on a loaded machine.
  ASSERT_TRUE(wait_until(
      [&] {
        for (const std::string& id : ids)
          if (status_of(s, id) != "in_progress") return false;
        return get_job(s, ids[0]).value("progress", 0) > 0;
      },
      120s))
      << s.log();
  auto r = s.client().Post("/v1/videos/" + ids[1] + "/cancel", "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  ASSERT_TRUE(wait_until(
      [&] {
        for (const std::string& id : ids)
          if (!is_ended(status_of(s, id))) return false;
        return true;
      },
      300s))
      << s.log();
  EXPECT_EQ(status_of(s, ids[0]), "completed") << s.log();
  EXPECT_EQ(status_of(s, ids[1]), "cancelled") << s.log();
  EXPECT_EQ(status_of(s, ids[2]), "completed") << s.log();
  auto c = s.client().Get("/v1/videos/" + ids[1] + "/content");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->status, 409);
  EXPECT_EQ(s.terminate(), 0);
  const std::string log = s.log();
  EXPECT_NE(log.find("batch of 3 jobs: ids " + ids[0] + ", " + ids[1] + ", " + ids[2]),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace ltx::test
