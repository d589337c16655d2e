// The API's JSON bodies: the Video object carries every field of the OpenAI SDK's `Video` type
// with the SDK's JSON types, plus the server's own; the list page, delete answer and model list.
#include "server/api_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/video_request.h"

namespace ltx::server::api_json_test {
namespace {

using json = nlohmann::json;

ServedModel served() {
  ServedModel m;
  m.id = "ltx-demo";
  m.demo = true;
  m.pipelines = {"one-stage", "two-stage"};
  m.default_pipeline = "two-stage";
  m.defaults["one-stage"] = {320, 192, 25, 24.0, 30};
  m.defaults["two-stage"] = {320, 192, 25, 24.0, 30};
  m.limits.max_width = m.limits.max_height = 512;
  m.limits.max_frames = 49;
  m.loras = {"style"};
  return m;
}

Job job_from(const json& create_body) {
  CreateBody body;
  body.json = create_body.dump();
  const VideoRequest r = parse_create(body, served());
  Job j;
  j.seq = 1;
  j.id = "video_0123456789abcdef0123456789abcdef";
  j.model = r.model;
  j.prompt = r.options.prompt;
  j.request_json = to_json(r).dump();
  j.batch_key = r.batch_key;
  j.size = r.size;
  j.seconds = r.seconds;
  j.created_at = 1700000000;
  j.download_token = "0f1e2d";
  return j;
}

TEST(ApiJson, VideoHasEverySdkFieldWithItsType) {
  const json v = video_json(job_from({{"prompt", "a cat"}, {"size", "330x192"}, {"seconds", "1"}}));
  // the SDK's Video, in order of its type
  ASSERT_TRUE(v.contains("id"));
  EXPECT_EQ(v["id"], "video_0123456789abcdef0123456789abcdef");
  EXPECT_EQ(v["object"], "video");
  EXPECT_EQ(v["model"], "ltx-demo");
  EXPECT_EQ(v["status"], "queued");
  EXPECT_TRUE(v["progress"].is_number_integer());
  EXPECT_EQ(v["progress"], 0);
  EXPECT_EQ(v["created_at"], 1700000000);
  for (const char* nullable : {"completed_at", "expires_at", "error", "remixed_from_video_id"}) {
    ASSERT_TRUE(v.contains(nullable)) << nullable;
    EXPECT_TRUE(v[nullable].is_null()) << nullable;
  }
  EXPECT_EQ(v["prompt"], "a cat");
  EXPECT_TRUE(v["seconds"].is_string());
  EXPECT_EQ(v["seconds"], "1.04");
  EXPECT_EQ(v["size"], "320x192");
  // ours: the settings used and what was changed
  EXPECT_EQ(v["pipeline"], "two-stage");
  EXPECT_EQ(v["num_frames"], 25);
  EXPECT_EQ(v["fps"], 24.0);
  EXPECT_EQ(v["seed"], 10);
  EXPECT_EQ(v["num_inference_steps"], 30);
  EXPECT_EQ(v["generate_audio"], true);
  ASSERT_EQ(v["adjustments"].size(), 2u);
  EXPECT_EQ(v["adjustments"][0],
            (json{{"param", "size"},
                  {"requested", "330x192"},
                  {"used", "320x192"},
                  {"reason", "the two-stage pipeline needs multiples of 64"}}));
  EXPECT_EQ(v["adjustments"][1]["used"], "1.04");
  for (const char* pending : {"stage", "queue_position", "started_at", "time_to_first_step_s",
                              "inference_time_s", "peak_memory_mb", "download_url"}) {
    ASSERT_TRUE(v.contains(pending)) << pending;
    EXPECT_TRUE(v[pending].is_null()) << pending;
  }
  EXPECT_EQ(v["attempts"], 0);
  EXPECT_EQ(v["timings"], json::array());
}

TEST(ApiJson, QueuePositionAndStageComeFromTheScheduler) {
  Job j = job_from({{"prompt", "x"}});
  EXPECT_EQ(video_json(j, {3, ""})["queue_position"], 3);
  j.status = JobStatus::InProgress;
  j.progress = 42;
  j.started_at = 1700000001.5;
  j.attempts = 1;
  const json v = video_json(j, {3, "stage 1"});
  EXPECT_EQ(v["status"], "in_progress");
  EXPECT_EQ(v["progress"], 42);
  EXPECT_TRUE(v["queue_position"].is_null());  // only a queued job has one
  EXPECT_EQ(v["stage"], "stage 1");
  EXPECT_EQ(v["started_at"], 1700000001.5);
  EXPECT_EQ(v["attempts"], 1);
}

TEST(ApiJson, CompletedJobHasTimingsAndADownloadUrl) {
  Job j = job_from({{"prompt", "x"}});
  j.status = JobStatus::Completed;
  j.progress = 100;
  j.completed_at = 1700000100;
  j.expires_at = 1700604900;
  j.metrics_json =
      json{{"inference_time_s", 12.5},
           {"peak_memory_mb", 2048.0},
           {"time_to_first_step_s", 0.4},
           {"stages",
            {{{"stage", "text"}, {"seconds", 0.3}}, {{"name", "stage 1"}, {"seconds", 9.0}}}}}
          .dump();
  const json v = video_json(j);
  EXPECT_EQ(v["status"], "completed");
  EXPECT_EQ(v["completed_at"], 1700000100);
  EXPECT_EQ(v["expires_at"], 1700604900);
  EXPECT_EQ(v["inference_time_s"], 12.5);
  EXPECT_EQ(v["peak_memory_mb"], 2048.0);
  EXPECT_EQ(v["time_to_first_step_s"], 0.4);
  EXPECT_EQ(v["timings"], (json{{{"stage", "text"}, {"seconds", 0.3}},
                                {{"stage", "stage 1"}, {"seconds", 9.0}}}));
  EXPECT_EQ(v["download_url"],
            "/v1/videos/video_0123456789abcdef0123456789abcdef/content?token=0f1e2d");
  EXPECT_TRUE(v["error"].is_null());
}

TEST(ApiJson, FailedJobHasItsError) {
  Job j = job_from({{"prompt", "x"}});
  j.status = JobStatus::Failed;
  j.error = JobError{"generation_error", "the transformer file is truncated"};
  const json v = video_json(j);
  EXPECT_EQ(v["status"], "failed");
  EXPECT_EQ(v["error"],
            (json{{"code", "generation_error"}, {"message", "the transformer file is truncated"}}));
  EXPECT_TRUE(v["download_url"].is_null());
  j.status = JobStatus::Cancelled;
  EXPECT_EQ(video_json(j)["status"], "cancelled");
}

TEST(ApiJson, UnreadableStoredColumnsLeaveTheirFieldsNull) {
  Job j = job_from({{"prompt", "x"}});
  j.request_json = "{not json";
  j.metrics_json = "[1, 2]";
  const json v = video_json(j);
  EXPECT_EQ(v["prompt"], "x");
  EXPECT_TRUE(v["pipeline"].is_null());
  EXPECT_EQ(v["adjustments"], json::array());
  EXPECT_TRUE(v["inference_time_s"].is_null());
}

TEST(ApiJson, DownloadUrlEncodesTheToken) {
  Job j = job_from({{"prompt", "x"}});
  j.download_token = "a b&c";
  EXPECT_EQ(download_url(j),
            "/v1/videos/video_0123456789abcdef0123456789abcdef/content?token=a%20b%26c");
}

TEST(ApiJson, ListPage) {
  ListPage empty;
  EXPECT_EQ(list_json(empty), (json{{"object", "list"},
                                    {"data", json::array()},
                                    {"first_id", nullptr},
                                    {"last_id", nullptr},
                                    {"has_more", false}}));
  ListPage page;
  page.data = {job_from({{"prompt", "one"}}), job_from({{"prompt", "two"}})};
  page.data[1].id = "video_ffffffffffffffffffffffffffffffff";
  page.has_more = true;
  const json l = list_json(page);
  EXPECT_EQ(l["object"], "list");
  ASSERT_EQ(l["data"].size(), 2u);
  EXPECT_EQ(l["data"][0]["prompt"], "one");
  EXPECT_EQ(l["data"][1]["object"], "video");
  EXPECT_EQ(l["first_id"], "video_0123456789abcdef0123456789abcdef");
  EXPECT_EQ(l["last_id"], "video_ffffffffffffffffffffffffffffffff");
  EXPECT_EQ(l["has_more"], true);
}

TEST(ApiJson, DeleteAnswer) {
  EXPECT_EQ(deleted_json("video_0123456789abcdef0123456789abcdef"),
            (json{{"id", "video_0123456789abcdef0123456789abcdef"},
                  {"object", "video.deleted"},
                  {"deleted", true}}));
}

TEST(ApiJson, ModelList) {
  const json m = models_json(served(), 1700000000);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  const json& d = m["data"][0];
  EXPECT_EQ(d["id"], "ltx-demo");
  EXPECT_EQ(d["object"], "model");
  EXPECT_EQ(d["created"], 1700000000);
  EXPECT_EQ(d["owned_by"], "ltx.cpp");
  EXPECT_EQ(d["demo"], true);
  EXPECT_EQ(d["pipelines"], json::array({"one-stage", "two-stage"}));
  EXPECT_EQ(d["default_pipeline"], "two-stage");
  EXPECT_EQ(d["defaults"]["two-stage"]["size"], "320x192");
  EXPECT_EQ(d["defaults"]["two-stage"]["seconds"], "1.04");
  EXPECT_EQ(d["defaults"]["two-stage"]["num_inference_steps"], 30);
  EXPECT_EQ(d["limits"]["max_frames"], 49);
  EXPECT_EQ(d["limits"]["max_prompt_chars"], 5000);
  EXPECT_EQ(d["loras"], json::array({"style"}));
  EXPECT_EQ(d["auto_duration"], false);
}

}  // namespace
}  // namespace ltx::server::api_json_test
