// The engine's batches (Engine::run_batch): several jobs with their own prompts, seeds, guidance
// and images share one denoising run, and on the CPU each job's frames and waveform have the bits
// of the same job run alone. A stopped job is dropped without stopping its batch mates; an error
// in one job's decode fails that job only; jobs that cannot share a run are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <set>

#include "core/cancel.h"
#include "generate/engine.h"
#include "generate/generate_test_util.h"
#include "media/image.h"
#include "support/test_support.h"

namespace ltx::engine_batch_test {
namespace {

generate::GenerateOptions tiny_job(const std::string& pipeline, int64_t seed) {
  generate::GenerateOptions o = test::small_demo_options(pipeline, 64, 64);
  o.demo_dir.clear();
  if (pipeline != "distilled") o.num_inference_steps = 2;
  o.seed = seed;
  return o;
}

generate::EngineOptions demo_engine_options() {
  generate::EngineOptions eo;
  eo.demo_dir = test::shared_demo_bundle().dir;
  eo.lora_library = {{"x", test::shared_demo_bundle().distilled_lora}};
  return eo;
}

generate::DecodedMedia run_alone(generate::Engine& engine, const generate::GenerateOptions& job) {
  generate::MemorySink sink;
  engine.run(job, {}, sink);
  return sink.media();
}

struct Batch {
  std::vector<generate::BatchMemberResult> results;
  std::vector<generate::MemorySink> sinks;
};

Batch run_batch(generate::Engine& engine, const std::vector<generate::GenerateOptions>& jobs,
                const std::vector<generate::JobControl>& controls = {}) {
  Batch b;
  b.sinks.resize(jobs.size());
  std::vector<generate::MediaSink*> sinks;
  for (auto& s : b.sinks) sinks.push_back(&s);
  const std::vector<generate::JobControl> c =
      controls.empty() ? std::vector<generate::JobControl>(jobs.size()) : controls;
  b.results = engine.run_batch(jobs, c, sinks);
  return b;
}

std::string error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

// Four one-stage jobs: other prompts, seeds, guidance scales; all with CFG and STG on.
std::vector<generate::GenerateOptions> four_guided_jobs() {
  std::vector<generate::GenerateOptions> jobs;
  const char* prompts[] = {"a red ball", "waves at night, with a long description of the sea",
                           "a cat", "city traffic in the rain"};
  for (int i = 0; i < 4; ++i) {
    generate::GenerateOptions o = tiny_job("one-stage", 100 + i * 17);
    o.prompt = prompts[i];
    o.video_guidance.cfg = 2.0 + i;
    o.audio_guidance.cfg = 4.0 - 0.5 * i;
    o.video_guidance.stg = 0.5 + 0.25 * i;
    if (i == 2) o.negative_prompt = "blurry";
    jobs.push_back(o);
  }
  return jobs;
}

void expect_solo_bits(generate::Engine& engine, const std::vector<generate::GenerateOptions>& jobs,
                      const Batch& b) {
  ASSERT_EQ(b.results.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_FALSE(b.results[i].error) << "job " << i << ": " << error_text(b.results[i].error);
    const generate::DecodedMedia solo = run_alone(engine, jobs[i]);
    EXPECT_TRUE(test::same_bits(b.sinks[i].media().frames, solo.frames)) << "job " << i;
    EXPECT_TRUE(test::same_bits(b.sinks[i].media().waveform, solo.waveform)) << "job " << i;
    EXPECT_EQ(b.results[i].result.prompt, jobs[i].prompt);
  }
  // The jobs are different videos.
  EXPECT_FALSE(test::same_bits(b.sinks[0].media().frames, b.sinks[1].media().frames));
}

TEST(EngineBatch, FourGuidedJobsHaveTheirSoloBits) {
  generate::Engine engine(demo_engine_options());
  const auto jobs = four_guided_jobs();
  std::string key;
  for (const auto& j : jobs) {
    const std::string k = engine.batch_key(j);
    ASSERT_FALSE(k.empty());
    if (!key.empty()) {
      EXPECT_EQ(k, key);
    }
    key = k;
  }
  // Every job hears the shared denoising steps.
  std::vector<int> steps(jobs.size(), 0);
  std::vector<generate::JobControl> controls(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    controls[i].listener = [&steps, i](const generate::ProgressEvent& e) {
      if (e.kind == generate::ProgressEvent::Kind::Step && e.stage == "stage 1" && e.done >= 1)
        ++steps[i];
    };
  const Batch b = run_batch(engine, jobs, controls);
  EXPECT_EQ(steps, (std::vector<int>{2, 2, 2, 2}));
  for (const auto& r : b.results) EXPECT_GT(r.result.time_to_first_step_s, 0.0);
  expect_solo_bits(engine, jobs, b);
}

TEST(EngineBatch, DistilledJobsWithLorasHaveTheirSoloBits) {
  generate::Engine engine(demo_engine_options());
  std::vector<generate::GenerateOptions> jobs;
  for (int i = 0; i < 3; ++i) {
    generate::GenerateOptions o = tiny_job("distilled", 5 + i);
    o.prompt = std::string("a scene, take ") + std::to_string(i);
    o.library_loras = {{"x", 0.5}};
    jobs.push_back(o);
  }
  const Batch b = run_batch(engine, jobs);
  expect_solo_bits(engine, jobs, b);
}

TEST(EngineBatch, JobsWithImagesHaveTheirSoloBits) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O";
  generate::Engine engine(demo_engine_options());
  std::vector<generate::GenerateOptions> jobs = four_guided_jobs();
  jobs.resize(3);
  for (size_t i = 0; i < jobs.size(); ++i) {
    Tensor image = Tensor::empty({48, 80, 3}, DType::U8);
    for (int64_t p = 0; p < image.numel(); ++p)
      image.data<uint8_t>()[p] = static_cast<uint8_t>((p * (37 + 10 * i)) % 251);
    generate::ImageFlag im;
    im.bytes = media::encode_png(image);
    im.frame_index = 0;
    im.strength = 0.8;
    jobs[i].images = {im};
  }
  const Batch b = run_batch(engine, jobs);
  expect_solo_bits(engine, jobs, b);
}

TEST(EngineBatch, AStoppedJobIsDroppedAndItsMatesStayExact) {
  generate::Engine engine(demo_engine_options());
  const auto jobs = four_guided_jobs();
  CancelToken token;
  std::vector<generate::JobControl> controls(jobs.size());
  controls[1].cancel = &token;
  controls[1].listener = [&](const generate::ProgressEvent& e) {
    if (e.kind == generate::ProgressEvent::Kind::Step && e.stage == "stage 1" && e.done == 1)
      token.request(1);
  };
  controls[3].deadline = Deadline::after(0.0);  // stopped before its text encoding
  const Batch b = run_batch(engine, jobs, controls);
  ASSERT_TRUE(b.results[1].error);
  EXPECT_THROW(std::rethrow_exception(b.results[1].error), Cancelled);
  ASSERT_TRUE(b.results[3].error);
  EXPECT_THROW(std::rethrow_exception(b.results[3].error), DeadlineExceeded);
  EXPECT_EQ(b.sinks[1].media().frames.defined(), false);
  for (size_t i : {0, 2}) {
    ASSERT_FALSE(b.results[i].error) << error_text(b.results[i].error);
    const generate::DecodedMedia solo = run_alone(engine, jobs[i]);
    EXPECT_TRUE(test::same_bits(b.sinks[i].media().frames, solo.frames)) << "job " << i;
    EXPECT_TRUE(test::same_bits(b.sinks[i].media().waveform, solo.waveform)) << "job " << i;
  }
}

TEST(EngineBatch, TheRunStopsWhenEveryJobWasStopped) {
  generate::Engine engine(demo_engine_options());
  auto jobs = four_guided_jobs();
  jobs.resize(2);
  for (auto& j : jobs) j.num_inference_steps = 4;
  CancelToken token;
  int last_step = 0;
  std::vector<generate::JobControl> controls(jobs.size());
  for (auto& c : controls) {
    c.cancel = &token;
    c.listener = [&](const generate::ProgressEvent& e) {
      if (e.kind != generate::ProgressEvent::Kind::Step || e.stage != "stage 1") return;
      last_step = std::max(last_step, static_cast<int>(e.done));
      if (e.done == 1) token.request(1);
    };
  }
  const Batch b = run_batch(engine, jobs, controls);
  for (const auto& r : b.results) {
    ASSERT_TRUE(r.error);
    EXPECT_THROW(std::rethrow_exception(r.error), Cancelled);
  }
  EXPECT_EQ(last_step, 1);
  // The engine stays exact for the next job.
  const Batch again = run_batch(engine, four_guided_jobs());
  expect_solo_bits(engine, four_guided_jobs(), again);
}

// A sink that fails when the decode starts.
class FailingSink final : public generate::MediaSink {
 public:
  void begin(const generate::MediaFormat&) override { fail("test sink: the disk is full"); }
  void write_frames(const Tensor&) override {}
  void write_audio(const Tensor&) override {}
  void finish() override {}
};

TEST(EngineBatch, ADecodeErrorFailsThatJobOnly) {
  generate::Engine engine(demo_engine_options());
  const auto jobs = four_guided_jobs();
  std::vector<generate::MemorySink> ok(jobs.size());
  FailingSink bad;
  std::vector<generate::MediaSink*> sinks = {&ok[0], &bad, &ok[2], &ok[3]};
  const std::vector<generate::JobControl> controls(jobs.size());
  const auto results = engine.run_batch(jobs, controls, sinks);
  ASSERT_TRUE(results[1].error);
  EXPECT_NE(error_text(results[1].error).find("the disk is full"), std::string::npos);
  for (size_t i : {0, 2, 3}) {
    ASSERT_FALSE(results[i].error) << error_text(results[i].error);
    EXPECT_TRUE(test::same_bits(ok[i].media().frames, run_alone(engine, jobs[i]).frames));
  }
}

TEST(EngineBatch, JobsThatCannotShareARunAreRefused) {
  generate::Engine engine(demo_engine_options());
  const generate::GenerateOptions base = tiny_job("one-stage", 1);
  // Runs alone: a pipeline without batching, an auto duration.
  EXPECT_TRUE(engine.batch_key(tiny_job("two-stage-hq", 1)).empty());
  generate::GenerateOptions auto_duration = base;
  auto_duration.num_frames.reset();
  auto_duration.auto_duration = std::pair{0.2, 0.4};
  EXPECT_TRUE(engine.batch_key(auto_duration).empty());
  // Different shapes, step counts, LoRA sets or strengths, guidance passes: different keys.
  const std::string key = engine.batch_key(base);
  ASSERT_FALSE(key.empty());
  generate::GenerateOptions seeded = base;
  seeded.seed = 99;
  seeded.prompt = "another prompt";
  seeded.video_guidance.cfg = 7.5;  // the preset's CFG is on; a scale is per job
  EXPECT_EQ(engine.batch_key(seeded), key);
  std::map<std::string, generate::GenerateOptions> apart;
  apart["size"] = base;
  apart["size"].width = 96;
  apart["frames"] = base;
  apart["frames"].num_frames = 17;
  apart["steps"] = base;
  apart["steps"].num_inference_steps = 3;
  apart["lora"] = base;
  apart["lora"].library_loras = {{"x", 0.5}};
  apart["lora strength"] = base;
  apart["lora strength"].library_loras = {{"x", 0.7}};
  apart["cfg off"] = base;
  apart["cfg off"].video_guidance.cfg = 1.0;
  apart["pipeline"] = tiny_job("distilled", 1);
  std::set<std::string> keys = {key};
  for (const auto& [what, o] : apart) EXPECT_TRUE(keys.insert(engine.batch_key(o)).second) << what;

  std::vector<generate::MemorySink> sinks(2);
  std::vector<generate::MediaSink*> ptrs = {&sinks[0], &sinks[1]};
  const std::vector<generate::JobControl> controls(2);
  const std::vector<generate::GenerateOptions> different = {base, apart["size"]};
  EXPECT_ERROR_HAS(engine.run_batch(different, controls, ptrs), "batch keys differ");
  const std::vector<generate::GenerateOptions> hq = {tiny_job("two-stage-hq", 1),
                                                     tiny_job("two-stage-hq", 2)};
  EXPECT_ERROR_HAS(engine.run_batch(hq, controls, ptrs), "runs alone");
}

}  // namespace
}  // namespace ltx::engine_batch_test
