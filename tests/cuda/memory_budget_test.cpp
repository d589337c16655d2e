// The GPU memory budget: the caching allocator's limit (--max-gpu-memory) and generations under
// it. Every test puts the limit back to none, so the other tests of this binary run unbounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "backend/cuda/allocator.h"
#include "backend/cuda/device.h"
#include "backend/cuda/stream.h"
#include "backend/device_query.h"
#include "core/out_of_memory.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "cuda/cuda_test_util.h"
#include "generate/engine.h"
#include "generate/generate_test_util.h"
#include "generate/memory_budget.h"
#include "generate/model_cache.h"
#include "generate/offload_plan.h"
#include "generate/progress.h"
#include "media/support.h"
#include "support/test_support.h"

namespace ltx {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;


// What device 0's allocator holds once its unused cached segments are given back: the memory
// other tests keep alive. Limits are set relative to it.
size_t settled_reserved() {
  cuda::synchronize(0);
  cuda::empty_cache(0);
  return cuda::allocator_stats(0).reserved_bytes;
}

std::string mib_text(size_t bytes) {
  char s[64];
  std::snprintf(s, sizeof s, "%.2f MiB", static_cast<double>(bytes) / static_cast<double>(kMiB));
  return s;
}

// Removes device 0's limit at the end of a test, whatever happened in it.
struct NoLimitAfter {
  ~NoLimitAfter() { cuda::set_memory_limit(0, 0); }
};

// The allocator-limit tests: each runs on a stream of its own (no block cached by another test
// can serve its requests), sets its limits relative to `base` (what the allocator holds once
// settled), and leaves device 0 without a limit whatever happened in it.
class CudaMemoryLimit : public ::testing::Test {
 protected:
  void SetUp() override {
    LTX_REQUIRE_CUDA();
    stream_.emplace(0);
    on_stream_.emplace(stream_->get());
    base = settled_reserved();
  }
  void TearDown() override {
    on_stream_.reset();
    stream_.reset();
    if (test::cuda_available()) cuda::set_memory_limit(0, 0);
  }

  size_t base = 0;

 private:
  std::optional<cuda::OwnedStream> stream_;
  std::optional<cuda::StreamGuard> on_stream_;
};

TEST_F(CudaMemoryLimit, AnAllocationPastTheLimitThrowsOutOfMemoryNamingTheBudget) {
  const size_t limit = base + 64 * kMiB;
  cuda::set_memory_limit(0, limit);
  EXPECT_EQ(cuda::memory_limit(0), limit);
  EXPECT_EQ(cuda::allocator_stats(0).limit_bytes, limit);
  const cuda::AllocatorStats before = cuda::allocator_stats(0);

  auto a = cuda::allocate(32 * kMiB, 0);  // under the limit: a 32 MiB segment
  ASSERT_NE(a.get(), nullptr);
  std::string msg;
  try {
    (void)cuda::allocate(48 * kMiB, 0);  // 32 + 48 MiB would pass it
  } catch (const OutOfMemory& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("out of GPU memory on cuda:0: tried to allocate 48.00 MiB"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("a --max-gpu-memory budget of " + mib_text(limit)), std::string::npos) << msg;
  EXPECT_NE(msg.find(kOutOfMemoryHelp), std::string::npos) << msg;
  const cuda::AllocatorStats after = cuda::allocator_stats(0);
  EXPECT_EQ(after.num_ooms, before.num_ooms + 1);
  EXPECT_EQ(after.num_cache_flushes, before.num_cache_flushes + 1) << "the cache is released first";
  EXPECT_LE(after.reserved_bytes, limit);
  EXPECT_LE(after.peak_reserved_bytes, std::max(limit, before.peak_reserved_bytes));

  // Through core's tensors too; and requests that fit still succeed.
  EXPECT_THROW(Tensor::empty({static_cast<int64_t>(40 * kMiB / 4)}, DType::F32, Device::cuda(0)),
               OutOfMemory);
  auto b = cuda::allocate(16 * kMiB, 0);
  EXPECT_NE(b.get(), nullptr);
  EXPECT_LE(cuda::allocator_stats(0).reserved_bytes, limit);
  // What the device reports free under the limit is at most the limit less what is allocated.
  EXPECT_LE(backend::free_memory_bytes(Device::cuda(0)),
            static_cast<int64_t>(limit - cuda::allocator_stats(0).allocated_bytes));
}

TEST_F(CudaMemoryLimit, CachedSegmentsAreGivenBackBeforeARequestFails) {
  const size_t limit = base + 64 * kMiB;
  cuda::set_memory_limit(0, limit);
  { auto a = cuda::allocate(40 * kMiB, 0); }  // freed: its 40 MiB segment stays cached
  EXPECT_EQ(cuda::allocator_stats(0).reserved_bytes, base + 40 * kMiB);
  const cuda::AllocatorStats before = cuda::allocator_stats(0);
  // 40 cached + 48 new would pass the limit: the cached segment goes back, then 48 MiB fits.
  auto b = cuda::allocate(48 * kMiB, 0);
  ASSERT_NE(b.get(), nullptr);
  const cuda::AllocatorStats after = cuda::allocator_stats(0);
  EXPECT_EQ(after.num_cache_flushes, before.num_cache_flushes + 1);
  EXPECT_EQ(after.num_ooms, before.num_ooms);
  EXPECT_EQ(after.reserved_bytes, base + 48 * kMiB);
}

TEST_F(CudaMemoryLimit, TheLimitCanBeRaisedAndLowered) {
  cuda::set_memory_limit(0, base + 32 * kMiB);
  EXPECT_THROW((void)cuda::allocate(48 * kMiB, 0), OutOfMemory);
  cuda::set_memory_limit(0, base + 128 * kMiB);  // raised: the same request fits
  auto a = cuda::allocate(48 * kMiB, 0);
  ASSERT_NE(a.get(), nullptr);
  a.reset();
  EXPECT_EQ(cuda::allocator_stats(0).reserved_bytes, base + 48 * kMiB);
  // Lowered below what is held: the cached segment is given back at once.
  cuda::set_memory_limit(0, base + 16 * kMiB);
  EXPECT_EQ(cuda::allocator_stats(0).reserved_bytes, base);
  EXPECT_EQ(cuda::memory_limit(0), base + 16 * kMiB);
  EXPECT_THROW((void)cuda::allocate(48 * kMiB, 0), OutOfMemory);
  cuda::set_memory_limit(0, 0);  // none
  EXPECT_EQ(cuda::allocator_stats(0).limit_bytes, 0u);
  EXPECT_NE(cuda::allocate(48 * kMiB, 0).get(), nullptr);
}

TEST_F(CudaMemoryLimit, TheEngineSideSetsItThroughTheBackend) {
  const Device gpu = Device::cuda(0);
  const int64_t total = backend::total_memory_bytes(gpu);
  EXPECT_EQ(total, static_cast<int64_t>(cuda::memory_info(0).total_bytes));
  backend::set_memory_limit(gpu, 3 * kGiB);
  EXPECT_EQ(cuda::memory_limit(0), static_cast<size_t>(3 * kGiB));
  generate::apply_gpu_budget(gpu, 2 * kGiB);
  EXPECT_EQ(cuda::memory_limit(0), static_cast<size_t>(2 * kGiB));
  EXPECT_ERROR_HAS(generate::apply_gpu_budget(gpu, total + kGiB),
                   "--max-gpu-memory " + generate::gib_text(total + kGiB) + " is more than cuda:0 has");
  EXPECT_EQ(cuda::memory_limit(0), static_cast<size_t>(2 * kGiB)) << "a refused budget changes nothing";
}

TEST_F(CudaMemoryLimit, TheModelCacheEvictsUnusedModelsAndRetriesALoadThatRanOut) {
  cuda::set_memory_limit(0, base + 64 * kMiB);
  const Device gpu = Device::cuda(0);
  generate::ModelCache cache(gpu, 0);  // no model budget: only running out of memory evicts
  const auto none = std::function<int64_t()>();
  int loads = 0;
  const std::function<std::shared_ptr<Tensor>()> model_40mib = [&] {
    loads += 1;
    return std::make_shared<Tensor>(
        Tensor::empty({static_cast<int64_t>(40 * kMiB / 4)}, DType::F32, gpu));
  };
  cache.acquire<Tensor>("a", "a", none, model_40mib);  // resident, unleased
  // 40 + 40 MiB pass the limit: the load fails, `a` is evicted, the second try fits.
  auto b = cache.acquire<Tensor>("b", "b", none, model_40mib);
  EXPECT_EQ(loads, 3);
  EXPECT_EQ(cache.stats().components.at("a").evictions, 1);
  EXPECT_EQ(cache.stats().entries, 1);
  EXPECT_LE(cuda::allocator_stats(0).reserved_bytes, base + 64 * kMiB);
  // `b` is leased: nothing can be evicted, so the next failure reaches the caller.
  EXPECT_THROW(cache.acquire<Tensor>("c", "c", none, model_40mib), OutOfMemory);
  EXPECT_EQ(loads, 4);
  EXPECT_EQ(cache.stats().components.at("b").evictions, 0);
  EXPECT_EQ(cache.stats().entries, 1);
}

TEST(GenerateUnderABudget, TheDemoRunsAndItsPeakStaysUnderTheBudget) {
  LTX_REQUIRE_CUDA();
  NoLimitAfter restore;
  const int64_t budget = static_cast<int64_t>(settled_reserved()) + 3 * kGiB;
  generate::GenerateOptions o = test::small_demo_options("two-stage", 64, 128);
  o.device = test::kGpu;
  o.max_gpu_memory_bytes = budget;
  backend::reset_peak_memory(test::kGpu);
  const test::InMemoryGeneration g = test::generate_in_memory(o);
  ASSERT_TRUE(g.media.frames.defined());
  const backend::MemoryStats m = backend::memory_stats(test::kGpu);
  std::printf("[two-stage demo under %.2f GiB] peak allocated %.1f MiB, peak reserved %.1f MiB\n",
              static_cast<double>(budget) / kGiB, static_cast<double>(m.peak_bytes) / kMiB,
              static_cast<double>(m.peak_reserved_bytes) / kMiB);
  EXPECT_GT(m.peak_bytes, 0);
  EXPECT_LE(m.peak_bytes, budget);
  EXPECT_LE(m.peak_reserved_bytes, budget);
  EXPECT_EQ(cuda::memory_limit(0), static_cast<size_t>(budget)) << "the run set the limit";
}

// --offload auto under a budget between what the planner says the demo's Gemma (6 layers; the
// demo's transformer has no more blocks than slots) needs resident and all streamed: the plan
// keeps its first layers and streams the rest, the run finishes under the budget (allocator peak)
// and its media are the resident run's bit for bit (streaming moves weights, not kernels).
TEST(GenerateUnderABudget, AutoOffloadStreamsWhatDoesNotFitAndStaysUnderTheBudget) {
  LTX_REQUIRE_CUDA();
  NoLimitAfter restore;
  generate::GenerateOptions o = test::small_demo_options("two-stage", 64, 128);
  o.device = test::kGpu;
  const test::InMemoryGeneration resident = test::generate_in_memory(o);
  ASSERT_TRUE(resident.media.frames.defined());

  generate::Progress quiet(nullptr, generate::Progress::Mode::Off);
  const generate::ResolvedModels models =
      generate::resolve_models(o, generate::component_needs(o), quiet);
  // The planner's needs for this run: resident (a budget nothing limits), all streamed (cpu).
  o.max_gpu_memory_bytes = 1024 * kGiB;
  o.offload = generate::Offload::Auto;
  const generate::StreamingPlan roomy = generate::plan_run_streaming(o, models);
  ASSERT_EQ(roomy.models.size(), 2u);
  ASSERT_EQ(roomy.models[1].component, "text encoder");
  o.offload = generate::Offload::Cpu;
  const generate::StreamingPlan streamed = generate::plan_run_streaming(o, models);
  const int64_t all = roomy.models[1].need_bytes, none = streamed.models[1].need_bytes;
  ASSERT_GT(all, none);

  const int64_t budget = (all + none) / 2;
  if (static_cast<int64_t>(settled_reserved()) > budget / 4)
    GTEST_SKIP() << "other tests of this process hold " << mib_text(settled_reserved())
                 << ": too much for a budget of " << mib_text(static_cast<size_t>(budget));
  o.offload = generate::Offload::Auto;
  o.max_gpu_memory_bytes = budget;
  const generate::StreamingPlan plan = generate::plan_run_streaming(o, models);
  ASSERT_TRUE(plan.text_encoder.enabled()) << "the budget leaves no room for every layer";
  EXPECT_GT(plan.text_encoder.resident, 0);
  EXPECT_LT(plan.text_encoder.resident, plan.models[1].blocks);

  backend::reset_peak_memory(test::kGpu);
  const test::InMemoryGeneration g = test::generate_in_memory(o);
  ASSERT_TRUE(g.media.frames.defined());
  const backend::MemoryStats m = backend::memory_stats(test::kGpu);
  std::printf("[two-stage demo, --offload auto under %.3f GiB: %lld of %lld Gemma layers resident] "
              "peak allocated %.1f MiB, peak reserved %.1f MiB\n",
              static_cast<double>(budget) / kGiB, static_cast<long long>(plan.text_encoder.resident),
              static_cast<long long>(plan.models[1].blocks), static_cast<double>(m.peak_bytes) / kMiB,
              static_cast<double>(m.peak_reserved_bytes) / kMiB);
  EXPECT_LE(m.peak_bytes, budget);
  EXPECT_LE(m.peak_reserved_bytes, budget);
  EXPECT_TRUE(test::same_bits(g.media.frames, resident.media.frames));
  EXPECT_TRUE(test::same_bits(g.media.waveform, resident.media.waveform));
}

TEST(GenerateUnderABudget, ABudgetBelowTheLargestModelIsRefusedBeforeAnyLoad) {
  LTX_REQUIRE_CUDA();
  NoLimitAfter restore;
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.device = test::kGpu;
  o.max_gpu_memory_bytes = kGiB;  // less than any model + the 1 GiB minimum headroom
  const int64_t cuda_tensors = allocation_counts().cuda;
  EXPECT_ERROR_HAS(test::generate_in_memory(o),
                   "more than the --max-gpu-memory budget of 1.00 GiB; nothing was loaded");
  EXPECT_EQ(allocation_counts().cuda, cuda_tensors) << "no tensor was made on the GPU";
  EXPECT_EQ(cuda::memory_limit(0), 0u) << "a refused budget is not set";
}

TEST(EngineOnCuda, DefaultModelBudgetIsTheGpuBudgetLessHeadroom) {
  LTX_REQUIRE_CUDA();
  NoLimitAfter restore;
  generate::EngineOptions eo;
  eo.device = test::kGpu;
  eo.demo_dir = test::shared_demo_bundle().dir;
  {
    // No flags: the device's memory less the headroom (the demo's models are far smaller).
    generate::Engine engine(eo);
    EXPECT_EQ(engine.cache().budget_bytes(),
              generate::default_model_budget(backend::total_memory_bytes(test::kGpu)));
    EXPECT_EQ(cuda::memory_limit(0), 0u);
  }
  const int64_t budget = static_cast<int64_t>(settled_reserved()) + 3 * kGiB;
  eo.max_gpu_memory_bytes = budget;
  generate::Engine engine(eo);
  EXPECT_EQ(engine.cache().budget_bytes(), generate::default_model_budget(budget));
  EXPECT_EQ(cuda::memory_limit(0), static_cast<size_t>(budget));
  generate::GenerateOptions job = test::small_demo_options("one-stage", 64, 64);
  job.demo_dir.clear();
  job.num_inference_steps = 1;
  backend::reset_peak_memory(test::kGpu);
  generate::MemorySink sink;
  engine.run(job, {}, sink);
  EXPECT_TRUE(sink.media().frames.defined());
  EXPECT_LE(backend::memory_stats(test::kGpu).peak_reserved_bytes, budget);
  EXPECT_LE(engine.cache_stats().bytes, engine.cache().budget_bytes());

  // A model budget above the GPU budget, and a GPU budget no model fits, are errors at start.
  eo.model_budget_bytes = budget + kGiB;
  EXPECT_ERROR_HAS(generate::Engine{eo}, "is more than the GPU budget of");
  eo.model_budget_bytes = 0;
  eo.max_gpu_memory_bytes = kGiB;
  EXPECT_ERROR_HAS(generate::Engine{eo},
                   "more than the --max-gpu-memory budget of 1.00 GiB; nothing was loaded");
}

// An allocation past the limit names the tensor being made and what the thread was doing (the
// scopes a generation's stages and weight loads set), with the free memory and the flags.
TEST_F(CudaMemoryLimit, OutOfMemoryNamesTheTensorAndTheScope) {
  cuda::set_memory_limit(0, base + 8 * kMiB);
  std::string msg;
  try {
    const MemoryScope stage("stage 1");
    const MemoryScope weight("weight 'blocks.0.attn1.to_q.weight'");
    (void)Tensor::empty({64, 1024, 1024}, DType::BF16, test::kGpu);  // 128 MiB
  } catch (const OutOfMemory& e) {
    msg = e.what();
    ASSERT_TRUE(e.report().has_value());
    EXPECT_EQ(e.report()->tensor, "bf16[64, 1024, 1024]");
    EXPECT_EQ(e.report()->requested_bytes, 128 * kMiB);
    EXPECT_GT(e.report()->total_bytes, 0u);
  }
  EXPECT_NE(msg.find("out of GPU memory on cuda:0 during stage 1, weight 'blocks.0.attn1.to_q.weight': "
                     "tried to allocate 128.00 MiB for a bf16[64, 1024, 1024] tensor ("),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(" free of "), std::string::npos) << msg;
  EXPECT_NE(msg.find(kOutOfMemoryHelp), std::string::npos) << msg;
  EXPECT_EQ(memory_scope(), "") << "the scopes ended with their blocks";
}

// A generation that runs out of GPU memory (a limit below what its models need, set on the
// allocator directly so the planner does not refuse it up front) fails naming the stage it was in,
// and leaves no output file.
TEST_F(CudaMemoryLimit, AGenerationOutOfMemoryNamesItsStageAndWritesNothing) {
  if (!media::image_io_available()) GTEST_SKIP() << "built without image I/O (the PNG output)";
  test::TempDir dir;
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.device = test::kGpu;
  o.num_frames = 1;
  o.output_path = dir.file("out/frame.png");
  (void)test::shared_demo_bundle();  // written before the limit
  cuda::set_memory_limit(0, base + 2 * kMiB);
  generate::Progress progress(nullptr, generate::Progress::Mode::Off);
  std::string msg;
  try {
    generate::run_generation(o, progress);
  } catch (const OutOfMemory& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("out of GPU memory on cuda:0 during "), std::string::npos) << msg;
  EXPECT_NE(msg.find(" tensor ("), std::string::npos) << msg;
  EXPECT_NE(msg.find(kOutOfMemoryHelp), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/frame.png")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("out/frame.png.tmp")));
}

}  // namespace
}  // namespace ltx
