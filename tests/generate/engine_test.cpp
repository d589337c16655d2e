// The resident engine: models loaded once and kept (within a budget), LoRA sets switched per job,
// and every job's output equal, bit for bit, to a one-shot `ltx generate` run of the same options.
#include "generate/engine.h"

#include <gtest/gtest.h>

#include "core/cancel.h"
#include "generate/generate_test_util.h"
#include "generate/model_cache.h"
#include "io/safetensors.h"
#include "pipelines/pipeline.h"
#include "support/test_support.h"

namespace ltx::engine_test {
namespace {

// A one-stage job at the smallest size: 64x64, 9 frames, one step.
generate::GenerateOptions tiny_job(int64_t seed = 7) {
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.demo_dir.clear();
  o.num_inference_steps = 1;
  o.seed = seed;
  return o;
}

generate::EngineOptions demo_engine_options(int64_t budget = 0) {
  generate::EngineOptions eo;
  eo.demo_dir = test::shared_demo_bundle().dir;
  eo.model_budget_bytes = budget;
  // Any LoRA of the transformer's layout serves as a library entry: the demo's distilled LoRA.
  eo.lora_library = {{"x", test::shared_demo_bundle().distilled_lora}};
  return eo;
}

generate::DecodedMedia run(generate::Engine& engine, const generate::GenerateOptions& job,
                           const generate::JobControl& control = {}) {
  generate::MemorySink sink;
  engine.run(job, control, sink);
  return sink.media();
}

// The same job through `ltx generate`'s path (run_generation, one-shot loading), with the library
// LoRAs named as files.
generate::DecodedMedia one_shot(generate::GenerateOptions job) {
  const auto& b = test::shared_demo_bundle();
  if (!job.library_loras.empty()) {
    job.models = generate::demo_model_flags(b, job.pipeline, false);
    for (const generate::LibraryLora& l : job.library_loras)
      job.models.loras.push_back({b.distilled_lora, l.strength});
    job.library_loras.clear();
  }
  job.demo_dir = b.dir;
  return test::generate_in_memory(job).media;
}

void expect_same_media(const generate::DecodedMedia& a, const generate::DecodedMedia& b,
                       const std::string& what) {
  EXPECT_TRUE(test::same_bits(a.frames, b.frames)) << what << ": frames differ";
  EXPECT_TRUE(test::same_bits(a.waveform, b.waveform)) << what << ": waveforms differ";
}

TEST(Engine, InfoDescribesTheDemoAndItsPipelines) {
  generate::Engine engine(demo_engine_options());
  const generate::EngineInfo& info = engine.info();
  EXPECT_EQ(info.model_id, "ltx-demo");
  EXPECT_TRUE(info.demo);
  EXPECT_EQ(info.default_pipeline, "two-stage");
  EXPECT_EQ(info.loras, (std::vector<std::string>{"x"}));
  std::vector<std::string> names;
  for (const auto& p : info.pipelines) {
    names.push_back(p.name);
    if (p.name == "one-stage") {
      EXPECT_EQ(p.width, generate::kDemoWidth);
      EXPECT_EQ(p.height, generate::kDemoHeight);
      EXPECT_EQ(p.num_frames, generate::kDemoNumFrames);
      EXPECT_EQ(p.size_multiple, 32);
      EXPECT_TRUE(p.guidance);
      EXPECT_TRUE(p.images);
    }
    if (p.name == "distilled" || p.name == "retake" || p.name == "ic-lora" || p.name == "dubit") {
      EXPECT_FALSE(p.steps_configurable) << p.name;  // the fixed distilled schedule
    }
    if (p.name == "two-stage") {
      EXPECT_EQ(p.size_multiple, 64);
    }
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "one-stage"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "two-stage"), names.end());
  // The demo bundle runs every pipeline, the ones with media inputs and audio output included,
  // and hdr-ic-lora with the bundle's HDR IC-LoRA.
  for (const std::string& p : pipelines::pipeline_names())
    EXPECT_NE(std::find(names.begin(), names.end(), p), names.end()) << p;
  EXPECT_TRUE(info.unavailable.empty());
  EXPECT_EQ(engine.cache_stats().loads, 0) << "the constructor loads no model";
}

TEST(Engine, ModelFlagsServeThePipelinesTheirFilesAllow) {
  // The demo's files named as flags: the two-stage files (upsampler, distilled LoRA) serve the
  // one-stage pipeline too, without them.
  const auto& b = test::shared_demo_bundle();
  generate::EngineOptions eo;
  eo.models = generate::demo_model_flags(b, "two-stage", false);
  generate::Engine engine(eo);
  const generate::EngineInfo& info = engine.info();
  EXPECT_FALSE(info.demo);
  EXPECT_EQ(info.model_id, "ltx-2.3-22b");
  std::vector<std::string> names;
  for (const auto& p : info.pipelines) names.push_back(p.name);
  for (const char* p : {"one-stage", "two-stage", "two-stage-hq", "distilled"})
    EXPECT_NE(std::find(names.begin(), names.end(), p), names.end()) << p;
  for (const auto& [name, why] : info.unavailable) EXPECT_FALSE(why.empty()) << name;
  EXPECT_NE(info.unavailable.at("hdr-ic-lora").find("start the engine with --hdr-lora PATH"), std::string::npos);

  generate::GenerateOptions job = tiny_job();
  generate::GenerateOptions cli = job;
  cli.models = generate::demo_model_flags(b, "one-stage", false);
  generate::MemorySink sink;
  const generate::GenerateResult r = engine.run(job, {}, sink);
  EXPECT_FALSE(r.demo);
  expect_same_media(sink.media(), test::generate_in_memory(cli).media, "flags vs one-shot");
}

TEST(Engine, TheSecondJobReadsNoWeightFileAndEqualsAOneShotRun) {
  generate::Engine engine(demo_engine_options());
  const generate::DecodedMedia first = run(engine, tiny_job());
  const generate::ModelCache::Stats after_first = engine.cache_stats();
  EXPECT_GT(after_first.loads, 0);
  EXPECT_GT(after_first.bytes, 0);

  const int64_t opens = io::safetensors_open_count();
  int64_t steps = 0;
  generate::JobControl control;
  control.listener = [&](const generate::ProgressEvent& e) {
    if (e.kind == generate::ProgressEvent::Kind::Step && e.stage == "stage 1" && e.done >= 1)
      ++steps;
  };
  const generate::DecodedMedia second = run(engine, tiny_job(), control);
  EXPECT_EQ(io::safetensors_open_count() - opens, 0) << "the second job opened weight files";
  EXPECT_EQ(engine.cache_stats().loads, after_first.loads) << "the second job loaded models";
  EXPECT_EQ(steps, 1);
  expect_same_media(first, second, "job 1 vs job 2");
  expect_same_media(second, one_shot(tiny_job()), "engine vs one-shot");

  // Another seed is another video from the same resident models; the result says so.
  generate::MemorySink sink;
  const generate::GenerateResult r = engine.run(tiny_job(8), {}, sink);
  EXPECT_FALSE(test::same_bits(sink.media().frames, second.frames));
  EXPECT_EQ(engine.cache_stats().loads, after_first.loads);
  EXPECT_EQ(r.models_loaded, 0);
  EXPECT_GT(r.time_to_first_step_s, 0.0);
  std::vector<std::string> stages;
  for (const auto& [stage, seconds] : r.stage_seconds) {
    stages.push_back(stage);
    EXPECT_GE(seconds, 0.0) << stage;
  }
  EXPECT_EQ(stages, (std::vector<std::string>{"text encoding", "model loading", "stage 1",
                                              "audio decode", "video decode"}));
}

// An engine started with --quantization fp8-cast: its jobs equal the one-shot fp8-cast runs bit
// for bit and differ from the unquantized engine's; the batch keys tell the two apart.
TEST(Engine, Fp8CastEngineEqualsTheOneShotFp8CastRun) {
  generate::EngineOptions qo = demo_engine_options();
  qo.models.quantization = quantization::Mode::Fp8Cast;
  generate::Engine fp8(qo), plain(demo_engine_options());
  EXPECT_NE(fp8.batch_key(tiny_job()), plain.batch_key(tiny_job()));
  const generate::DecodedMedia q = run(fp8, tiny_job());
  generate::GenerateOptions shot = tiny_job();
  shot.models.quantization = quantization::Mode::Fp8Cast;
  expect_same_media(q, one_shot(shot), "fp8-cast engine vs one-shot");
  EXPECT_FALSE(test::same_bits(q.frames, run(plain, tiny_job()).frames));
  // A job may repeat the engine's mode, not ask for another.
  EXPECT_NO_THROW(fp8.batch_key(shot));
  EXPECT_ERROR_HAS(plain.batch_key(shot), "a job cannot choose --quantization fp8-cast");
}

TEST(Engine, TheFirstJobCountsItsLoads) {
  generate::Engine engine(demo_engine_options());
  generate::MemorySink sink;
  const generate::GenerateResult r = engine.run(tiny_job(), {}, sink);
  EXPECT_EQ(r.models_loaded, engine.cache_stats().loads);
  EXPECT_GE(r.models_loaded, 4);  // text encoder, transformer, audio and video decoders
  EXPECT_GT(r.time_to_first_step_s, 0.0);
}

TEST(Engine, PipelinesShareTheResidentModelsAndStayExact) {
  // Two-stage fuses the distilled LoRA into its second stage; the one-stage job after it must
  // get the base weights, and the two-stage job after that its LoRA again.
  generate::Engine engine(demo_engine_options());
  generate::GenerateOptions two = test::small_demo_options("two-stage", 64, 128);
  two.demo_dir.clear();
  two.num_inference_steps = 1;
  const generate::DecodedMedia two_stage = one_shot(two);
  expect_same_media(run(engine, two), two_stage, "two-stage");
  expect_same_media(run(engine, tiny_job()), one_shot(tiny_job()), "one-stage after two-stage");
  const int64_t loads = engine.cache_stats().loads;
  expect_same_media(run(engine, two), two_stage, "two-stage again");
  EXPECT_EQ(engine.cache_stats().loads, loads);
  EXPECT_EQ(engine.cache_stats().components.at("transformer").entries, 1);
}

TEST(Engine, EachLoraSetGivesItsOneShotResultAndTheNextJobTheBase) {
  generate::Engine engine(demo_engine_options());
  generate::GenerateOptions job = tiny_job();
  const generate::DecodedMedia base = one_shot(job);
  for (const double strength : {0.8, 0.0, 0.5}) {
    job.library_loras.clear();
    if (strength > 0) job.library_loras = {{"x", strength}};
    const generate::DecodedMedia got = run(engine, job);
    const generate::DecodedMedia want = strength > 0 ? one_shot(job) : base;
    expect_same_media(got, want, "LoRA x at " + std::to_string(strength));
    if (strength > 0) {
      EXPECT_FALSE(test::same_bits(got.frames, base.frames)) << "no LoRA effect";
    }
  }
  EXPECT_EQ(engine.cache_stats().components.at("transformer").loads, 1);

  job.library_loras = {{"nope", 1.0}};
  generate::MemorySink sink;
  EXPECT_ERROR_HAS(engine.run(job, {}, sink), "LoRA 'nope' is not in the LoRA library (it has x)");
}

TEST(Engine, AJobAfterACancelIsExact) {
  generate::Engine engine(demo_engine_options());
  generate::GenerateOptions job = tiny_job();
  job.num_inference_steps = 3;
  job.library_loras = {{"x", 0.8}};
  CancelToken token;
  generate::JobControl control;
  control.cancel = &token;
  control.listener = [&](const generate::ProgressEvent& e) {
    if (e.kind == generate::ProgressEvent::Kind::Step && e.stage == "stage 1" && e.done == 1)
      token.request(1);
  };
  generate::MemorySink sink;
  EXPECT_THROW(engine.run(job, control, sink), Cancelled);
  // The transformer was left with the LoRA fused; the next job without it gets the base.
  expect_same_media(run(engine, tiny_job()), one_shot(tiny_job()), "after a cancel");
  // A deadline stops a job the same way, and the next one is exact too.
  generate::JobControl late;
  late.deadline = Deadline::after(0.0);
  EXPECT_THROW(engine.run(tiny_job(), late, sink), DeadlineExceeded);
  expect_same_media(run(engine, tiny_job()), one_shot(tiny_job()), "after a timeout");
}

TEST(Engine, ABudgetBelowTheSumEvictsAndStaysExact) {
  // The sizes of the components, from an engine without a budget.
  generate::Engine free(demo_engine_options());
  run(free, tiny_job());
  const auto sizes = free.cache_stats().components;
  int64_t sum = 0;
  for (const auto& [name, c] : sizes) sum += c.bytes;
  // What one step holds at once: the text encoder; the transformer; the two decoders.
  const int64_t decoders = sizes.at("audio decoder").bytes + sizes.at("video decoder").bytes;
  const int64_t budget =
      std::max({sizes.at("text encoder").bytes, sizes.at("transformer").bytes, decoders});
  ASSERT_LT(budget, sum);

  generate::Engine engine(demo_engine_options(budget));
  const generate::DecodedMedia a = run(engine, tiny_job());
  const generate::DecodedMedia b = run(engine, tiny_job());
  const generate::ModelCache::Stats s = engine.cache_stats();
  EXPECT_GT(s.evictions, 0);
  EXPECT_LE(s.bytes, budget);
  EXPECT_GT(s.loads, static_cast<int64_t>(sizes.size())) << "evicted models load again";
  expect_same_media(a, b, "job 1 vs job 2 under a budget");
  expect_same_media(b, one_shot(tiny_job()), "budget vs one-shot");
}

TEST(Engine, AComponentLargerThanTheBudgetIsAClearError) {
  generate::Engine free(demo_engine_options());
  run(free, tiny_job());
  const auto sizes = free.cache_stats().components;
  const int64_t transformer = sizes.at("transformer").bytes;
  // Room for the text encoder (it loads first), not for the transformer.
  ASSERT_LT(sizes.at("text encoder").bytes, transformer);
  generate::Engine engine(demo_engine_options(transformer - 1));
  generate::MemorySink sink;
  const std::string e = test::error_of([&] { engine.run(tiny_job(), {}, sink); });
  for (const char* part : {"the transformer needs", "more than the whole model memory budget",
                           "raise --model-memory-budget"})
    EXPECT_NE(e.find(part), std::string::npos) << e;
}

TEST(Engine, AJobCannotNameModelFilesOrAnUnusablePipeline) {
  generate::Engine engine(demo_engine_options());
  generate::MemorySink sink;
  generate::GenerateOptions job = tiny_job();
  job.models.checkpoint_path = "/elsewhere.safetensors";
  EXPECT_ERROR_HAS(engine.run(job, {}, sink), "a job cannot name model files");
  job = tiny_job();
  job.width = 65;
  EXPECT_ERROR_HAS(engine.run(job, {}, sink), "--width 65 must be a positive multiple of 32");
  // Library LoRAs are an engine's; the one-shot path names LoRA files instead.
  job = tiny_job();
  job.demo_dir = test::shared_demo_bundle().dir;
  job.library_loras = {{"x", 1.0}};
  EXPECT_ERROR_HAS(test::generate_in_memory(job), "need an Engine with a LoRA library");
}

TEST(Engine, HdrIcLoraIsServedWithTheHdrLoraGivenAndItsMetadataCheckedAtStart) {
  const auto& b = test::shared_demo_bundle();
  generate::EngineOptions eo;
  eo.models = generate::demo_model_flags(b, "two-stage", false);
  eo.hdr_lora = b.hdr_lora;
  {
    generate::Engine engine(eo);
    EXPECT_EQ(engine.info().unavailable.count("hdr-ic-lora"), 0u);
    generate::GenerateOptions job;
    job.pipeline = "hdr-ic-lora";
    job.prompt = "x";
    job.hdr_lora = b.hdr_lora;
    generate::MemorySink sink;
    EXPECT_ERROR_HAS(engine.run(job, {}, sink), "a job cannot name --hdr-lora");
    job.hdr_lora.clear();
    job.library_loras = {{"x", 1.0}};
    EXPECT_ERROR_HAS(engine.run(job, {}, sink), "the hdr-ic-lora pipeline runs with its HDR IC-LoRA alone");
  }
  eo.hdr_lora = b.ic_lora;  // an IC-LoRA without HDR metadata
  generate::Engine engine(eo);
  const auto why = engine.info().unavailable.find("hdr-ic-lora");
  ASSERT_NE(why, engine.info().unavailable.end());
  EXPECT_NE(why->second.find("--hdr-lora"), std::string::npos) << why->second;
}

TEST(Engine, AnUnreadableLibraryLoraIsNamedAtStart) {
  generate::EngineOptions eo = demo_engine_options();
  eo.lora_library["broken"] = "/no/such/lora.safetensors";
  const std::string e = test::error_of([&] { generate::Engine engine(eo); });
  EXPECT_NE(e.find("LoRA library: the entry 'broken': "), std::string::npos) << e;
  EXPECT_NE(e.find("/no/such/lora.safetensors"), std::string::npos) << e;
}

TEST(Engine, PreloadLoadsWhatTheFirstJobNeeds) {
  generate::Engine engine(demo_engine_options());
  engine.preload("one-stage");
  const generate::ModelCache::Stats s = engine.cache_stats();
  for (const char* c : {"text encoder", "transformer", "audio decoder", "video decoder"})
    EXPECT_EQ(s.components.at(c).loads, 1) << c;
  const int64_t opens = io::safetensors_open_count();
  run(engine, tiny_job());
  EXPECT_EQ(engine.cache_stats().loads, s.loads) << "the first job after a preload loaded models";
  EXPECT_EQ(io::safetensors_open_count(), opens);
  generate::MemorySink sink;
  EXPECT_ERROR_HAS(engine.preload("three-stage"), "three-stage");
}

// ---- ModelCache on its own

TEST(ModelCache, LeasedEntriesStayAndTheLeastRecentlyUsedGoFirst) {
  generate::ModelCache cache(Device::cpu(), 1000);
  const auto estimate = [](int64_t n) { return std::function<int64_t()>([n] { return n; }); };
  const std::function<std::shared_ptr<int>()> make_int = [] { return std::make_shared<int>(1); };
  auto a = cache.acquire<int>("a", "a", estimate(600), make_int);
  {
    // `a` is leased: `b` loads beside it, over the budget, and `a` stays.
    auto b = cache.acquire<int>("b", "b", estimate(600), make_int);
    EXPECT_EQ(cache.stats().entries, 2);
    EXPECT_EQ(cache.stats().evictions, 0);
  }
  // A hit returns the same object and loads nothing.
  EXPECT_EQ(cache.acquire<int>("a", "a", estimate(600), make_int).get(), a.get());
  EXPECT_EQ(cache.stats().loads, 2);
  a.reset();
  // `c` needs room: `b` (least recently used, unleased) goes first, then `a`.
  auto c = cache.acquire<int>("c", "c", estimate(600), make_int);
  const generate::ModelCache::Stats s = cache.stats();
  EXPECT_EQ(s.entries, 1);
  EXPECT_EQ(s.components.at("a").evictions, 1);
  EXPECT_EQ(s.components.at("b").evictions, 1);
  EXPECT_EQ(s.bytes, 600);
  // Loading `a` again uses the size it measured before.
  EXPECT_ERROR_HAS(cache.acquire<int>("huge", "huge", estimate(1001), make_int),
                   "the huge needs 1001 bytes (estimated from its files), more than the whole "
                   "model memory budget of 1000 bytes; raise --model-memory-budget");
  // A load that turns out larger than the budget is refused and freed.
  const std::function<std::shared_ptr<Tensor>()> big = [] {
    return std::make_shared<Tensor>(Tensor::empty({1000}, DType::F32));
  };
  EXPECT_ERROR_HAS(cache.acquire<Tensor>("big", "big", estimate(0), big), "measured while loading");
  EXPECT_EQ(cache.stats().entries, 1);
  cache.clear();
  EXPECT_EQ(cache.stats().entries, 1) << "c is leased";
  c.reset();
  cache.clear();
  EXPECT_EQ(cache.stats().entries, 0);
  EXPECT_EQ(cache.stats().bytes, 0);
}

}  // namespace
}  // namespace ltx::engine_test
