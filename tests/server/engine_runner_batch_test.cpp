// The engine runner's batches, in process on the demo engine: jobs the engine can run together
// share one run and each gets its own MP4, thumbnail and outcome; jobs the engine refuses to batch (here a
// pipeline without batching under an equal scheduler key) run one after another; a job stopped
// mid-batch reports Cancelled and leaves no file; every run is counted in ltx_batch_size.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "generate/engine.h"
#include "generate/generate_test_util.h"
#include "media/image.h"
#include "media/support.h"
#include "server/data_dir.h"
#include "server/engine_runner.h"
#include "server/metrics.h"
#include "server/video_request.h"

namespace ltx::server {
namespace {

using nlohmann::json;

struct Fixture {
  ltx::test::TempDir tmp;
  generate::Engine engine{[] {
    generate::EngineOptions eo;
    eo.demo_dir = ltx::test::shared_demo_bundle().dir;
    return eo;
  }()};
  DataDir dir{tmp.file("data")};
  Metrics metrics;
  EngineRunner runner{engine, Device::cpu(), dir, &metrics};
  std::vector<Job> jobs;

  // A job of the request `body` (JSON), with the scheduler's key unless `key` is given.
  void add(const json& body, const std::string& key = "") {
    CreateBody b;
    b.json = body.dump();
    const VideoRequest r = parse_create(b, served_model(engine.info(), {}));
    Job j;
    char id[40];
    std::snprintf(id, sizeof id, "video_%032zx", jobs.size() + 1);
    j.id = id;
    j.model = r.model;
    j.prompt = r.options.prompt;
    j.request_json = to_json(r).dump();
    j.batch_key = key.empty() ? r.batch_key : key;
    jobs.push_back(j);
  }

  std::vector<RunItem> items(std::vector<CancelToken>& tokens) {
    std::vector<RunItem> out;
    for (size_t i = 0; i < jobs.size(); ++i) {
      RunItem item;
      item.job = &jobs[i];
      item.cancel = &tokens[i];
      out.push_back(item);
    }
    return out;
  }
};

json tiny(const std::string& pipeline, const std::string& prompt, int64_t seed) {
  json j = {{"prompt", prompt}, {"pipeline", pipeline}, {"width", 64}, {"height", 64},
            {"num_frames", 9},  {"seed", seed}};
  if (pipeline != "distilled") j["num_inference_steps"] = 2;
  return j;
}

TEST(EngineRunnerBatch, JobsOfOneKeyShareARunAndEachGetsItsOwnOutput) {
  Fixture f;
  for (int i = 0; i < 3; ++i) f.add(tiny("one-stage", "clip " + std::to_string(i), 10 + i));
  ASSERT_EQ(f.jobs[0].batch_key, f.jobs[2].batch_key);
  std::vector<CancelToken> tokens(f.jobs.size());
  std::vector<int> stage1_steps(f.jobs.size(), 0);
  std::vector<RunItem> items = f.items(tokens);
  for (size_t i = 0; i < items.size(); ++i)
    items[i].progress = [&stage1_steps, i](const ProgressEvent& e) {
      if (e.stage == "stage 1" && e.done >= 1) ++stage1_steps[i];
    };
  const std::vector<RunOutcome> out = f.runner.run(items);
  ASSERT_EQ(out.size(), 3u);
  std::vector<std::string> sums;
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i].status, RunStatus::Completed) << out[i].error.message;
    EXPECT_EQ(out[i].output_file, f.dir.output_path(f.jobs[i].id));
    EXPECT_TRUE(std::filesystem::exists(out[i].output_file));
    EXPECT_EQ(json::parse(out[i].metrics_json).value("batch_size", 0), 3);
    sums.push_back(sha256_hex_of_file(out[i].output_file));
  }
  EXPECT_EQ(stage1_steps, (std::vector<int>{2, 2, 2}));
  EXPECT_NE(sums[0], sums[1]);
  EXPECT_NE(f.metrics.render().find("ltx_batch_size_sum 3\nltx_batch_size_count 1\n"),
            std::string::npos)
      << f.metrics.render();

  // Each member has its own thumbnail, a frame of its video's size; on the CPU it is the one the
  // job gets when it runs alone.
  if (!media::image_io_available()) return;
  std::vector<std::string> thumbnails;
  for (const Job& job : f.jobs) {
    const std::string path = f.dir.thumbnail_path(job.id);
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_EQ(media::read_image(path).shape(), (Shape{64, 64, 3}));
    thumbnails.push_back(sha256_hex_of_file(path));
  }
  EXPECT_NE(thumbnails[0], thumbnails[1]);
  const std::vector<RunOutcome> alone = f.runner.run({items[1]});
  ASSERT_EQ(alone[0].status, RunStatus::Completed) << alone[0].error.message;
  EXPECT_EQ(sha256_hex_of_file(f.dir.thumbnail_path(f.jobs[1].id)), thumbnails[1]);
}

TEST(EngineRunnerBatch, JobsTheEngineWillNotBatchRunOneAfterAnother) {
  Fixture f;
  // The scheduler's key never groups these (two-stage-hq does not batch); an equal one given here
  // stands for keys that disagree with the engine's.
  f.add(tiny("two-stage-hq", "first", 1), "same");
  f.add(tiny("two-stage-hq", "second", 2), "same");
  std::vector<CancelToken> tokens(f.jobs.size());
  const std::vector<RunOutcome> out = f.runner.run(f.items(tokens));
  ASSERT_EQ(out.size(), 2u);
  for (const RunOutcome& o : out) {
    ASSERT_EQ(o.status, RunStatus::Completed) << o.error.message;
    EXPECT_FALSE(json::parse(o.metrics_json).contains("batch_size"));
  }
  EXPECT_NE(f.metrics.render().find("ltx_batch_size_sum 2\nltx_batch_size_count 2\n"),
            std::string::npos)
      << f.metrics.render();
}

TEST(EngineRunnerBatch, AStoppedMemberIsCancelledAndLeavesNoFile) {
  Fixture f;
  for (int i = 0; i < 2; ++i) f.add(tiny("one-stage", "clip " + std::to_string(i), 10 + i));
  std::vector<CancelToken> tokens(f.jobs.size());
  std::vector<RunItem> items = f.items(tokens);
  items[0].progress = [&](const ProgressEvent& e) {
    if (e.stage == "stage 1" && e.done == 1) tokens[0].request(1);
  };
  const std::vector<RunOutcome> out = f.runner.run(items);
  EXPECT_EQ(out[0].status, RunStatus::Cancelled);
  EXPECT_FALSE(std::filesystem::exists(f.dir.output_path(f.jobs[0].id)));
  EXPECT_FALSE(std::filesystem::exists(f.dir.thumbnail_path(f.jobs[0].id)));
  EXPECT_EQ(out[1].status, RunStatus::Completed) << out[1].error.message;
  EXPECT_TRUE(std::filesystem::exists(f.dir.output_path(f.jobs[1].id)));
  EXPECT_EQ(std::filesystem::exists(f.dir.thumbnail_path(f.jobs[1].id)),
            media::image_io_available());
}

}  // namespace
}  // namespace ltx::server
