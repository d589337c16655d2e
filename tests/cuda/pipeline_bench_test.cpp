// `ltx bench pipeline` on the GPU with the tiny preset: every model made on the device, every
// stage timed with the GPU's peak allocation, and the same stages and media sizes as the CPU run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/device_query.h"
#include "bench/pipeline_bench.h"
#include "core/error.h"
#include "cuda/cuda_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

bench::PipelineBenchOptions tiny(const std::string& pipeline, Device device) {
  bench::PipelineBenchOptions o;
  o.preset = "tiny";
  o.pipeline = pipeline;
  o.device = device;
  o.width = 128;
  o.height = 128;
  o.frames = 9;
  if (pipeline != "distilled") o.steps = 2;  // the distilled schedules are fixed (8 + 3)
  return o;
}

std::vector<std::string> names(const bench::PipelineBenchResult& r) {
  std::vector<std::string> n;
  for (const auto& s : r.stages) n.push_back(s.stage);
  return n;
}

TEST(PipelineBenchOnCuda, TwoStageRunsEveryStageOnTheGpuLikeTheCpu) {
  LTX_REQUIRE_CUDA();
  const bench::PipelineBenchResult cpu = bench::run_pipeline_bench(tiny("two-stage", Device::cpu()));
  const bench::PipelineBenchResult gpu = bench::run_pipeline_bench(tiny("two-stage", test::kGpu));
  EXPECT_EQ(names(gpu), names(cpu));
  EXPECT_EQ(gpu.decoded_frames, 9);
  EXPECT_EQ(gpu.decoded_frames, cpu.decoded_frames);
  EXPECT_EQ(gpu.audio_samples, cpu.audio_samples);
  EXPECT_EQ(gpu.parameters, cpu.parameters);  // the same models, made on the other device
  EXPECT_NE(gpu.device_name.find("cuda:0"), std::string::npos) << gpu.device_name;
  for (const auto& s : gpu.stages) {
    EXPECT_GT(s.peak_bytes, 0) << s.stage;  // the GPU allocator's peak during the stage
    EXPECT_GE(s.seconds, s.synthesis_seconds) << s.stage;
  }
  ASSERT_GE(gpu.stages.size(), 3u);
  EXPECT_EQ(gpu.stages[1].stage, "model loading");
  EXPECT_GT(gpu.stages[1].synthesis_seconds, 0);
  EXPECT_EQ(gpu.stages[2].stage, "stage 1");
  EXPECT_EQ(gpu.stages[2].steps, 2);
  EXPECT_GT(gpu.stages[2].step_median_ms, 0);
  EXPECT_GT(gpu.end_to_end_seconds, 0);
  // The tail overlaps on the GPU: the audio decode on its own stream beside the video decode,
  // timed there; on the CPU it decodes first.
  EXPECT_TRUE(gpu.tail.plan.audio_beside_video);
  EXPECT_FALSE(cpu.tail.plan.audio_beside_video);
  EXPECT_TRUE(gpu.tail.plan.sink_thread);
  EXPECT_GT(gpu.tail.audio_seconds, 0);
  EXPECT_GT(gpu.tail.video_seconds, 0);
}

TEST(PipelineBenchOnCuda, ABudgetBelowTheLargestModelIsRefusedBeforeAnythingIsMade) {
  LTX_REQUIRE_CUDA();
  // The full-size preset: the 22B transformer (about 40 GiB in bf16) cannot fit 16 GiB; the
  // refusal comes before the allocator's limit is set or any weight is made.
  bench::PipelineBenchOptions o;
  o.device = test::kGpu;
  o.max_gpu_memory_bytes = int64_t{16} << 30;
  const std::string e = test::error_of([&] { (void)bench::run_pipeline_bench(o); });
  EXPECT_NE(e.find("transformer"), std::string::npos) << e;
  EXPECT_NE(e.find("--max-gpu-memory"), std::string::npos) << e;
}

TEST(PipelineBenchOnCuda, UnderABudgetTheRunIsPlannedFromItsModelsAndStaysUnderIt) {
  LTX_REQUIRE_CUDA();
  // The planner reads the models' sizes from their files: the bench's stand-ins must give them
  // (names and shapes of every parameter), with Gemma's layers and the transformer's blocks
  // streamed from host memory.
  bench::PipelineBenchOptions o = tiny("two-stage", test::kGpu);
  // 2 GiB: the planner keeps a stage slack of 1 GiB over the tiny run's activations.
  o.max_gpu_memory_bytes = int64_t{2} << 30;
  o.offload = generate::Offload::Cpu;
  const bench::PipelineBenchResult r = bench::run_pipeline_bench(o);
  EXPECT_EQ(r.decoded_frames, 9);
  EXPECT_GT(r.peak_bytes, 0);
  EXPECT_LE(r.peak_bytes, o.max_gpu_memory_bytes);
  EXPECT_EQ(r.offload, "cpu");
  EXPECT_EQ(backend::memory_limit_bytes(test::kGpu), 0)
      << "the run's budget is lifted when it ends (later tests in the process run unlimited)";
}

TEST(PipelineBenchOnCuda, AQ4KTransformerRunsStreamedUnderABudgetAndIsReported) {
  LTX_REQUIRE_CUDA();
  // --weights-format q4_k: the transformer's linear weights made as Q4_K blocks, planned from the
  // stand-in GGUF file and streamed as GGML blocks through the device slots.
  bench::PipelineBenchOptions o = tiny("distilled", test::kGpu);
  o.weights_format = "q4_k";
  o.max_gpu_memory_bytes = int64_t{2} << 30;
  o.offload = generate::Offload::Cpu;
  const bench::PipelineBenchResult r = bench::run_pipeline_bench(o);
  EXPECT_EQ(r.decoded_frames, 9);
  EXPECT_EQ(r.weights_format, "Q4_K");
  EXPECT_EQ(bench::pipeline_bench_json(r)["weights_format"], "Q4_K");
  EXPECT_LE(r.peak_bytes, o.max_gpu_memory_bytes);
  // The tiny preset's linears are narrower than a K block (256 values), so they stay dense here;
  // the full-size blocks' bytes are checked on the stand-in files
  // (PipelineBenchStandIns.AQuantizedWeightsFormatGivesThePlannerAGgufTransformerOfItsBlocks).
}

}  // namespace
}  // namespace ltx
