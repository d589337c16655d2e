// --quantization fp8-scaled-mm and fp8 on CUDA against the CPU: the Linear formats (the
// quantisation at load, the FP8 GEMMs, the scales bound on the device) and the tiny LTX-2.3
// transformer under each mode (f32 and bf16 compute) against the CPU's run of the same mode, and
// the fp8-scaled-mm LoRA rule fused on the device.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/tiny_transformer_modes.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/transformer/model.h"
#include "nn/linear.h"
#include "ops/elementwise.h"
#include "ops/quantized_linear.h"
#include "parity/parity.h"
#include "quantization/fp8_cast.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using quantization::Mode;

// A pre-quantised FP8 layer as the reference's files hold it (bias bf16).
io::WeightMap fp8_scaled_map(const std::string& module, int64_t in, int64_t out) {
  const ops::Fp8PerTensor q = ops::quantize_fp8_per_tensor(
      test::random_tensor({out, in}, 31, -0.2f, 0.2f).to(DType::BF16));
  io::WeightMap w;
  w.add(module + ".weight", q.weight);
  w.add(module + ".weight_scale", q.weight_scale);
  w.add(module + ".input_scale", Tensor::full({}, 4.0 / 448.0, DType::F32));
  w.add(module + ".bias", test::random_tensor({out}, 32, -0.2f, 0.2f).to(DType::BF16));
  return w;
}

io::WeightMap bf16_map(const std::string& module, int64_t in, int64_t out) {
  io::WeightMap w;
  w.add(module + ".weight", test::random_tensor({out, in}, 33, -0.2f, 0.2f).to(DType::BF16));
  w.add(module + ".bias", test::random_tensor({out}, 34, -0.2f, 0.2f).to(DType::BF16));
  return w;
}

// Loads "transformer_blocks.0.ff.net.0.proj" from a fresh map on both devices: the CPU in bf16
// (the CPU op's bf16 path rounds the activations as the GPU does) and the GPU in bf16.
std::pair<nn::Linear, nn::Linear> load_both(const std::function<io::WeightMap()>& make,
                                            int64_t in, int64_t out, Mode mode) {
  io::WeightMap wc = make(), wg = make();
  io::WeightMap sc = wc.scoped("transformer_blocks.0.ff.net.0."),
                sg = wg.scoped("transformer_blocks.0.ff.net.0.");
  nn::Linear cpu = nn::Linear::load(sc, "proj", in, out, true, {DType::BF16, Device::cpu(), mode});
  nn::Linear gpu = nn::Linear::load(sg, "proj", in, out, true, {DType::BF16, test::kGpu, mode});
  return {std::move(cpu), std::move(gpu)};
}

TEST(CudaFp8Scaled, LinearBindsOnTheGpuAndMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  const std::string module = "transformer_blocks.0.ff.net.0.proj";
  const int64_t in = 256, out = 384;
  const auto [cpu, gpu] =
      load_both([&] { return fp8_scaled_map(module, in, out); }, in, out, Mode::Fp8ScaledMm);
  ASSERT_EQ(gpu.format, nn::LinearFormat::Fp8Scaled);
  ASSERT_TRUE(gpu.weight.device().is_cuda());
  ASSERT_TRUE(gpu.weight_scale.device().is_cuda());
  ASSERT_TRUE(gpu.input_scale.device().is_cuda());
  EXPECT_TRUE(test::same_bytes(gpu.weight, cpu.weight));
  const Tensor x = test::random_tensor({2, 77, in}, 35, -3.f, 3.f).to(DType::BF16);
  const Tensor xg = x.to(test::kGpu);
  // The same activation quantisation; the GEMM's fast accumulation and the one bf16 rounding of
  // the epilogue (the CPU rounds the product and the bias sum separately): bf16 steps.
  EXPECT_LE(test::max_rel_err(gpu(xg), cpu(x)), 2e-2);
  // The CPU computes elementwise ops in f32 only: its GELU runs on the widened linear output.
  EXPECT_LE(test::max_rel_err(gpu.gelu_tanh(xg), ops::gelu_tanh(cpu(x).to(DType::F32))), 2e-2);
}

TEST(CudaFp8, LinearQuantisesOnTheGpuAsTheCpuAndMatchesIt) {
  LTX_REQUIRE_CUDA();
  const std::string module = "transformer_blocks.0.ff.net.0.proj";
  const int64_t in = 256, out = 384;
  const auto [cpu, gpu] = load_both([&] { return bf16_map(module, in, out); }, in, out, Mode::Fp8);
  ASSERT_EQ(gpu.format, nn::LinearFormat::Fp8PerToken);
  ASSERT_TRUE(gpu.weight.device().is_cuda());
  // The per-tensor quantisation at load is bit for bit the CPU's (the amax is exact).
  EXPECT_TRUE(test::same_bytes(gpu.weight, cpu.weight));
  EXPECT_EQ(gpu.weight_scale.item(), cpu.weight_scale.item());
  // Rows of very different magnitudes: each gets its own scale.
  Tensor x = test::random_tensor({2, 77, in}, 36).to(DType::F32);
  x = ops::mul(x, test::random_tensor({2, 77, 1}, 37, 0.01f, 50.f)).to(DType::BF16);
  const Tensor xg = x.to(test::kGpu);
  EXPECT_LE(test::max_rel_err(gpu(xg), cpu(x)), 2e-2);
  // The CPU computes elementwise ops in f32 only: its GELU runs on the widened linear output.
  EXPECT_LE(test::max_rel_err(gpu.gelu_tanh(xg), ops::gelu_tanh(cpu(x).to(DType::F32))), 2e-2);
}

// The bf16 tiny fixture with fp8-cast's Linear weights pre-quantised per tensor and one static
// input_scale (tests/models/transformer_fp8_scaled_test.cpp makes the same file).
std::string write_prequantised(const test::TempDir& dir) {
  const io::SafetensorsFile src(test::fixture("ltx23.weights.bf16.safetensors"));
  std::vector<std::pair<std::string, Tensor>> out;
  for (const std::string& name : src.names()) {
    const Tensor t = src.tensor(name);
    if (!name.ends_with(".weight") || !quantization::is_fp8_cast_parameter(name)) {
      out.emplace_back(name, t);
      continue;
    }
    const ops::Fp8PerTensor q = ops::quantize_fp8_per_tensor(t);
    const std::string stem = name.substr(0, name.size() - std::string(".weight").size());
    out.emplace_back(name, q.weight);
    out.emplace_back(stem + ".weight_scale", q.weight_scale);
    out.emplace_back(stem + ".input_scale", Tensor::full({}, 16.0 / 448.0, DType::F32));
  }
  const std::string path = dir.file("fp8_scaled.safetensors");
  io::write_safetensors(path, out, src.metadata());
  return path;
}

// f32: the activations quantise as the CPU's until a GEMM's fast accumulation moves a value across
// an e4m3 rounding boundary of the next layer (one step, 6%, for a few values), so 2e-2 rather than
// the dense runs' 1e-4. bf16 compute adds its own rounding (2e-2 for fp8-cast): 4e-2. A wrong scale
// or a layout error is O(1).
constexpr test::TinyModeBounds kScaledBounds{2e-2, 4e-2};

TEST(CudaFp8Scaled, TinyTransformerMatchesTheCpuRun) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  test::expect_tiny_transformer_matches_cpu(dir, write_prequantised(dir), Mode::Fp8ScaledMm,
                                            kScaledBounds);
}

TEST(CudaFp8, TinyTransformerMatchesTheCpuRun) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  test::expect_tiny_transformer_matches_cpu(dir, test::fixture("ltx23.weights.bf16.safetensors"),
                                            Mode::Fp8, kScaledBounds);
}

TEST(CudaFp8Scaled, LoraFusesOnTheGpuAsTheCpuAndResetsBitForBit) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  const std::string weights = write_prequantised(dir);
  const std::string q = "transformer_blocks.0.attn1.to_q";
  const std::string lora_path = dir.file("lora.safetensors");
  io::write_safetensors(
      lora_path,
      {{"diffusion_model." + q + ".lora_A.weight", test::random_tensor({2, 64}, 1).to(DType::BF16)},
       {"diffusion_model." + q + ".lora_B.weight", test::random_tensor({64, 2}, 2).to(DType::BF16)}});
  const lora::LoraSet set = {{lora::LoraFile::open(lora_path), 0.7}};
  namespace tf = models::transformer;
  const auto fused = [&](Device device, DType dtype) {
    io::WeightMap w({io::SafetensorsFile::open(weights)},
                    tf::transformer_key_map(tf::LTXModelType::AudioVideo));
    auto fuser = std::make_unique<lora::Fuser>(w, std::vector<lora::LoraSet>{set},
                                               nn::LoadOptions{dtype, device, Mode::Fp8ScaledMm});
    // Copies: on the CPU, to(cpu) would return the bound buffer itself, which apply and reset
    // write in place.
    const Tensor base = fuser->bound(q + ".weight").to(Device::cpu()).clone();
    const double base_scale = fuser->bound(q + ".weight_scale").item();
    fuser->apply(set);
    const Tensor weight = fuser->bound(q + ".weight").to(Device::cpu()).clone();
    EXPECT_FALSE(test::same_bytes(weight, base)) << "the LoRA changed nothing";
    const double scale = fuser->bound(q + ".weight_scale").item();
    fuser->reset();
    EXPECT_TRUE(test::same_bytes(fuser->bound(q + ".weight").to(Device::cpu()), base));
    EXPECT_EQ(fuser->bound(q + ".weight_scale").item(), base_scale);
    return std::make_pair(weight, scale);
  };
  const auto [cpu_w, cpu_s] = fused(Device::cpu(), DType::F32);
  const auto [gpu_w, gpu_s] = fused(test::kGpu, DType::BF16);
  // The requantisation's ops on the GPU are bit for bit the CPU's (CudaFuseDeltaFp8PerTensor).
  EXPECT_TRUE(test::same_bytes(gpu_w, cpu_w));
  EXPECT_EQ(gpu_s, cpu_s);
}

}  // namespace
}  // namespace ltx
