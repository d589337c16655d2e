// The GPU memory budget's rules (generate/memory_budget.h) and the model cache's evict-and-retry
// after an out-of-memory load; the CPU parts (the allocator's limit is tested in tests/cuda).
#include "generate/memory_budget.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>

#include "core/out_of_memory.h"
#include "generate/engine.h"
#include "generate/generate.h"
#include "generate/generate_test_util.h"
#include "generate/model_cache.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "quantization/nvfp4.h"
#include "support/test_support.h"

namespace ltx::memory_budget_test {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(MemoryBudget, HeadroomAndDefaultModelBudgetFollowTheDocumentedRule) {
  // max(1/5, min(6 GiB, 1/2)): 6 GiB of 16 and 24 GiB, 1/5 from 30 GiB up, 1/2 below 12 GiB.
  EXPECT_EQ(generate::activation_headroom(16 * kGiB), 6 * kGiB);
  EXPECT_EQ(generate::activation_headroom(24 * kGiB), 6 * kGiB);
  EXPECT_EQ(generate::activation_headroom(80 * kGiB), 16 * kGiB);
  EXPECT_EQ(generate::activation_headroom(4 * kGiB), 2 * kGiB);
  EXPECT_EQ(generate::default_model_budget(24 * kGiB), 18 * kGiB);
  EXPECT_EQ(generate::default_model_budget(80 * kGiB), 64 * kGiB);
  EXPECT_EQ(generate::default_model_budget(2 * kGiB), kGiB);
  EXPECT_GT(generate::default_model_budget(1000), 0);
  EXPECT_ERROR_HAS(generate::default_model_budget(0), "must be > 0 bytes");
}

TEST(MemoryBudget, ParsesGibAndNamesTheFlagOnBadValues) {
  EXPECT_EQ(generate::parse_gib("24"), 24 * kGiB);
  EXPECT_EQ(generate::parse_gib("23.5"), 23 * kGiB + kGiB / 2);
  EXPECT_EQ(generate::parse_gib("0.5", "--x"), kGiB / 2);
  EXPECT_ERROR_HAS(generate::parse_gib("0"), "--max-gpu-memory 0 must be more than 0 GiB");
  EXPECT_ERROR_HAS(generate::parse_gib("-3"), "--max-gpu-memory -3 must be more than 0 GiB");
  EXPECT_ERROR_HAS(generate::parse_gib("24G"), "--max-gpu-memory '24G' is not a number of GiB");
  EXPECT_ERROR_HAS(generate::parse_gib(""), "is not a number of GiB");
  EXPECT_ERROR_HAS(generate::parse_gib("nan"), "is not a number of GiB");
  EXPECT_ERROR_HAS(generate::parse_gib("1e12"), "more memory than any device has");
}

TEST(MemoryBudget, TheLargestComponentPlusTheMinimumHeadroomMustFit) {
  const std::vector<generate::ComponentSize> parts = {
      {"text encoder", 22 * kGiB}, {"transformer", 36 * kGiB}, {"video decoder", kGiB}};
  EXPECT_NO_THROW(generate::check_budget_fits(parts, 37 * kGiB));
  EXPECT_NO_THROW(generate::check_budget_fits({}, 1));
  const std::string e = test::error_of([&] { generate::check_budget_fits(parts, 24 * kGiB); });
  EXPECT_NE(e.find("the transformer needs 36.00 GiB on the device plus at least 1.00 GiB"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("more than the --max-gpu-memory budget of 24.00 GiB; nothing was loaded"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("--quantization fp8-cast"), std::string::npos) << e;
  EXPECT_NE(e.find("--offload cpu"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
  EXPECT_ERROR_HAS(generate::check_budget_fits(parts, 36 * kGiB, "the test's"),
                   "more than the the test's budget");
}

TEST(MemoryBudget, ComponentSizesReadTheDemoFilesHeaders) {
  const generate::DemoBundle& b = test::shared_demo_bundle();
  const generate::ModelPaths paths =
      generate::resolve_model_paths(generate::demo_model_flags(b, "two-stage", false));
  const auto bf16 = generate::component_sizes(paths, DType::BF16);
  const auto f32 = generate::component_sizes(paths, DType::F32);
  ASSERT_EQ(bf16.size(), f32.size());
  bool transformer = false, text = false;
  for (size_t i = 0; i < bf16.size(); ++i) {
    EXPECT_GT(bf16[i].bytes, 0) << bf16[i].component;
    transformer = transformer || bf16[i].component == "transformer";
    text = text || bf16[i].component == "text encoder";
    // f32 doubles the floating tensors (the audio decoder loads f32 either way).
    if (bf16[i].component != "audio decoder")
      EXPECT_GT(f32[i].bytes, bf16[i].bytes) << bf16[i].component;
    else
      EXPECT_EQ(f32[i].bytes, bf16[i].bytes);
  }
  EXPECT_TRUE(transformer);
  EXPECT_TRUE(text);
  // A folder's .safetensors files are summed (a Gemma root); other paths count 0.
  test::TempDir dir;
  const std::string folder = std::filesystem::path(dir.file("x")).parent_path().string();
  std::filesystem::copy_file(paths.spatial_upsampler.path, dir.file("a.safetensors"));
  std::filesystem::copy_file(paths.spatial_upsampler.path, dir.file("b.safetensors"));
  test::write_bytes(dir.file("notes.txt"), "not weights");
  const int64_t one = generate::stored_bytes(paths.spatial_upsampler.path, {}, DType::BF16);
  EXPECT_EQ(generate::stored_bytes(folder, {}, DType::BF16), 2 * one);
  EXPECT_EQ(generate::stored_bytes(dir.file("missing"), {}, DType::BF16), 0);
}

TEST(MemoryBudget, QuantizedLinearsCountAtOneByteAWeight) {
  test::TempDir dir;
  const std::string q = "model.diffusion_model.transformer_blocks.0.attn1.to_q.";
  const std::string k = "model.diffusion_model.transformer_blocks.0.attn1.to_k.";
  const std::string gate = "model.diffusion_model.transformer_blocks.0.attn1.to_gate_logits.";
  // to_q bf16 (fp8-cast's and fp8's layer), to_k pre-quantised, the gate dense outside the policy.
  const std::string path = dir.file("t.safetensors");
  io::write_safetensors(path, {{q + "weight", Tensor::zeros({16, 16}, DType::BF16)},
                               {q + "bias", Tensor::zeros({16}, DType::BF16)},
                               {k + "weight", Tensor::zeros({16, 16}, DType::F8E4M3FN)},
                               {k + "weight_scale", Tensor::full({}, 1.0, DType::F32)},
                               {k + "input_scale", Tensor::full({}, 1.0, DType::F32)},
                               {gate + "weight", Tensor::zeros({2, 16}, DType::BF16)}});
  using quantization::Mode;
  const auto bytes = [&](Mode m) { return generate::stored_bytes(path, {}, DType::BF16, m); };
  const int64_t scales = 2 * 2;  // the two f32 scalars, counted in the compute dtype as loaded
  const int64_t gate_bytes = 2 * 16 * 2;
  EXPECT_EQ(bytes(Mode::None), (256 + 16 + 256) * 2 + scales + gate_bytes);
  // fp8-cast: to_q's weight and bias, and to_k (folded, then cast), at one byte.
  EXPECT_EQ(bytes(Mode::Fp8Cast), 256 + 16 + 256 + scales + gate_bytes);
  // fp8-scaled-mm: only the file's FP8 layer.
  EXPECT_EQ(bytes(Mode::Fp8ScaledMm), 256 * 2 + 16 * 2 + 256 + scales + gate_bytes);
  // fp8: both weights; the bias stays in the compute dtype.
  EXPECT_EQ(bytes(Mode::Fp8), 256 + 16 * 2 + 256 + scales + gate_bytes);
}

// NVFP4 layers count at their packed size: half a byte a weight, one E4M3 scale per 16 weights
// (rows padded to 128, scale columns to 4) and the f32 decode scale.
TEST(MemoryBudget, Nvfp4LayersCountAtTheirPackedSize) {
  test::TempDir dir;
  const std::string q = "model.diffusion_model.transformer_blocks.0.attn1.to_q.";
  const std::string gate = "model.diffusion_model.transformer_blocks.0.attn1.to_gate_logits.";
  using quantization::Mode;
  const int64_t gate_bytes = 2 * 16 * 2;
  // nvfp4-cast: to_q (one of the 12) quantised at load, its bias and the gate in bf16.
  const std::string bf16 = dir.file("bf16.safetensors");
  io::write_safetensors(bf16, {{q + "weight", Tensor::zeros({128, 64}, DType::BF16)},
                               {q + "bias", Tensor::zeros({128}, DType::BF16)},
                               {gate + "weight", Tensor::zeros({2, 16}, DType::BF16)}});
  const int64_t packed = 128 * 32 + 128 * 4 + 4;
  EXPECT_EQ(quantization::nvfp4_weight_bytes(128, 64), packed);
  EXPECT_EQ(generate::stored_bytes(bf16, {}, DType::BF16, Mode::Nvfp4Cast),
            packed + 128 * 2 + gate_bytes);
  EXPECT_EQ(generate::stored_bytes(bf16, {}, DType::BF16, Mode::None),
            128 * 64 * 2 + 128 * 2 + gate_bytes);
  // nvfp4-prequant: the file's NVFP4 layer as stored (u8 pairs, E4M3 scales, two f32 scalars),
  // its bias in bf16, the dense gate in bf16.
  const std::string pre = dir.file("prequant.safetensors");
  io::write_safetensors(pre, {{q + "weight", Tensor::zeros({128, 32}, DType::U8)},
                              {q + "weight_scale", Tensor::zeros({128, 4}, DType::F8E4M3FN)},
                              {q + "weight_scale_2", Tensor::full({}, 1.0, DType::F32)},
                              {q + "input_scale", Tensor::full({}, 1.0, DType::F32)},
                              {q + "bias", Tensor::zeros({128}, DType::BF16)},
                              {gate + "weight", Tensor::zeros({2, 16}, DType::BF16)}});
  EXPECT_EQ(generate::stored_bytes(pre, {}, DType::BF16, Mode::Nvfp4Prequant),
            packed + 4 + 128 * 2 + gate_bytes);
}

TEST(MemoryBudget, TheCpuTakesNoGpuBudget) {
  EXPECT_ERROR_HAS(generate::apply_gpu_budget(Device::cpu(), kGiB),
                   "--max-gpu-memory budgets GPU memory; it does not apply to --device cpu");
  generate::GenerateOptions o = test::small_demo_options("one-stage", 64, 64);
  o.max_gpu_memory_bytes = kGiB;
  EXPECT_ERROR_HAS(generate::validate_options(o, false), "does not apply to --device cpu");
  generate::EngineOptions eo;
  eo.demo_dir = test::shared_demo_bundle().dir;
  eo.max_gpu_memory_bytes = kGiB;
  EXPECT_ERROR_HAS(generate::Engine{eo}, "does not apply to --device cpu");
}

// ---- evict-and-retry in the model cache

std::function<int64_t()> estimate(int64_t n) {
  return [n] { return n; };
}

// A loader that throws OutOfMemory its first `failures` calls, then gives an int.
struct FlakyLoader {
  int failures = 0;
  int calls = 0;
  std::function<std::shared_ptr<int>()> fn() {
    return [this] {
      calls += 1;
      if (calls <= failures) throw OutOfMemory("out of GPU memory on cuda:0 (test)");
      return std::make_shared<int>(calls);
    };
  }
};

TEST(ModelCacheOutOfMemory, EvictsTheUnleasedEntriesAndRetriesTheLoadOnce) {
  generate::ModelCache cache(Device::cpu(), 0);  // no budget: only the failure evicts
  const std::function<std::shared_ptr<int>()> make = [] { return std::make_shared<int>(0); };
  cache.acquire<int>("old", "old", estimate(10), make);          // unleased
  auto held = cache.acquire<int>("held", "held", estimate(10), make);  // leased
  cache.acquire<int>("older", "older", estimate(10), make);      // unleased
  FlakyLoader loader{1};
  auto big = cache.acquire<int>("big", "big", estimate(10), loader.fn());
  EXPECT_EQ(loader.calls, 2);
  EXPECT_EQ(*big, 2);
  const generate::ModelCache::Stats s = cache.stats();
  EXPECT_EQ(s.components.at("old").evictions, 1);
  EXPECT_EQ(s.components.at("older").evictions, 1);
  EXPECT_EQ(s.components.at("held").evictions, 0) << "a leased entry is never evicted";
  EXPECT_EQ(s.components.at("held").entries, 1);
  EXPECT_EQ(s.components.at("big").entries, 1);
  EXPECT_EQ(s.entries, 2);
  // The held entry is still the same object.
  EXPECT_EQ(cache.acquire<int>("held", "held", estimate(10), make).get(), held.get());
}

TEST(ModelCacheOutOfMemory, TheSecondFailureReachesTheCaller) {
  generate::ModelCache cache(Device::cpu(), 0);
  const std::function<std::shared_ptr<int>()> make = [] { return std::make_shared<int>(0); };
  cache.acquire<int>("old", "old", estimate(10), make);
  FlakyLoader loader{2};
  EXPECT_THROW(cache.acquire<int>("big", "big", estimate(10), loader.fn()), OutOfMemory);
  EXPECT_EQ(loader.calls, 2) << "one retry, no more";
  EXPECT_EQ(cache.stats().entries, 0);
  EXPECT_EQ(cache.stats().evictions, 1);
  // The cache stays usable: the next load works.
  FlakyLoader ok{0};
  EXPECT_EQ(*cache.acquire<int>("big", "big", estimate(10), ok.fn()), 1);
  EXPECT_EQ(cache.stats().entries, 1);
}

TEST(ModelCacheOutOfMemory, WithNothingToEvictTheFailureIsNotRetried) {
  generate::ModelCache cache(Device::cpu(), 0);
  const std::function<std::shared_ptr<int>()> make = [] { return std::make_shared<int>(0); };
  auto held = cache.acquire<int>("held", "held", estimate(10), make);
  FlakyLoader loader{1};
  EXPECT_THROW(cache.acquire<int>("big", "big", estimate(10), loader.fn()), OutOfMemory);
  EXPECT_EQ(loader.calls, 1);
  EXPECT_EQ(cache.stats().entries, 1);
  EXPECT_EQ(cache.stats().evictions, 0);
  // Other errors are never retried, whatever the cache holds.
  held.reset();
  int calls = 0;
  const std::function<std::shared_ptr<int>()> broken = [&]() -> std::shared_ptr<int> {
    calls += 1;
    throw Error("a broken file");
  };
  EXPECT_THROW(cache.acquire<int>("broken", "broken", estimate(10), broken), Error);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cache.stats().entries, 1);
}

TEST(ModelCacheOutOfMemory, EvictUnleasedCountsAndKeepsLeases) {
  generate::ModelCache cache(Device::cpu(), 0);
  const std::function<std::shared_ptr<int>()> make = [] { return std::make_shared<int>(0); };
  cache.acquire<int>("a", "a", estimate(10), make);
  auto b = cache.acquire<int>("b", "b", estimate(10), make);
  EXPECT_EQ(cache.evict_unleased("for the test"), 1);
  EXPECT_EQ(cache.evict_unleased("for the test"), 0);
  EXPECT_EQ(cache.stats().entries, 1);
  EXPECT_EQ(cache.stats().components.at("a").evictions, 1);
}

}  // namespace
}  // namespace ltx::memory_budget_test
