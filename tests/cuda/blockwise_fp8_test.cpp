// --quantization fp8-blockwise on CUDA against the CPU (ops/quantized_linear.h's blockwise rules):
// the tile and group quantisations bit for bit, cuBLASLt's block-scaled GEMM (small shapes with
// partial tiles, and a 4096 x 4096 layer), the Linear bound on the GPU, the LoRA rule, and the
// tiny LTX-2.3 transformer under the mode in f32 and bf16 compute.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/device.h"
#include "cuda/cuda_test_util.h"
#include "cuda/tiny_transformer_modes.h"
#include "io/weights.h"
#include "nn/linear.h"
#include "ops/elementwise.h"
#include "ops/quantized_linear.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using quantization::Mode;
using test::kGpu;
using test::same_bytes;

// Skips unless device 0 is a Hopper GPU (the block-scaled GEMM's only home).
#define LTX_REQUIRE_HOPPER()                                                  \
  do {                                                                        \
    LTX_REQUIRE_CUDA();                                                       \
    if (cuda::compute_capability(0).major != 9)                               \
      GTEST_SKIP() << "cuBLASLt's block-scaled FP8 GEMM needs an sm_90 GPU";  \
  } while (0)

// Activations whose groups differ in magnitude, with the values the cast must handle.
Tensor activations(const Shape& shape, uint64_t seed, DType dt, bool specials) {
  Tensor x = test::random_tensor(shape, seed, -1.f, 1.f);
  std::vector<float> v = x.to_float_vector();
  for (size_t i = 0; i < v.size(); ++i) v[i] *= std::ldexp(1.0f, static_cast<int>((i / 128) % 9) - 4);
  if (specials) {
    const float inf = std::numeric_limits<float>::infinity();
    const float s[] = {0.f, -0.f, inf, -inf, std::nanf(""), 1e6f, -1e6f, 1e-7f, 448.f, 480.f};
    for (size_t i = 0; i < sizeof s / sizeof s[0] && i * 37 < v.size(); ++i) v[i * 37] = s[i];
  }
  return Tensor::from_vector(v, shape).to(dt);
}

TEST(CudaFp8Blockwise, WeightTilesQuantiseAndDequantiseAsTheCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (const Shape& shape : {Shape{16, 32}, Shape{130, 260}, Shape{256, 384}}) {
    for (const DType dt : {DType::BF16, DType::F32}) {
      const Tensor w = test::random_tensor(shape, seed++, -0.3f, 0.2f).to(dt);
      const ops::Fp8Blockwise want = ops::quantize_fp8_blockwise(w);
      const ops::Fp8Blockwise got = ops::quantize_fp8_blockwise(w.to(kGpu));
      ASSERT_TRUE(got.weight.device().is_cuda());
      EXPECT_TRUE(same_bytes(got.weight, want.weight)) << shape.str();
      EXPECT_TRUE(same_bytes(got.weight_scale, want.weight_scale)) << shape.str();
      for (const DType out : {DType::BF16, DType::F32})
        EXPECT_TRUE(same_bytes(ops::dequantize_fp8_blockwise(got.weight, got.weight_scale, out),
                               ops::dequantize_fp8_blockwise(want.weight, want.weight_scale, out)))
            << shape.str();
    }
  }
  // A zero tile is refused on the GPU too, naming the tile.
  Tensor z = test::random_tensor({140, 256}, 9);
  std::vector<float> v = z.to_float_vector();
  for (int64_t r = 128; r < 140; ++r)
    for (int64_t c = 128; c < 256; ++c) v[static_cast<size_t>(r * 256 + c)] = 0.0f;
  EXPECT_ERROR_HAS(ops::quantize_fp8_blockwise(Tensor::from_vector(v, {140, 256}).to(kGpu)),
                   "all zeros in its 128 x 128 tile (1, 1)");
}

TEST(CudaFp8Blockwise, ActivationGroupsQuantiseAsTheCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 20;
  for (const Shape& shape : {Shape{1, 7}, Shape{3, 130}, Shape{5, 333}, Shape{2, 77, 512}}) {
    for (const DType dt : {DType::BF16, DType::F32}) {
      const Tensor x = activations(shape, seed++, dt, true);
      const ops::Fp8PerGroup want = ops::quantize_fp8_per_group(x);
      const Tensor xg = x.to(kGpu);
      for (const Tensor& in : {xg, test::misaligned_copy(xg), test::non_contiguous_copy(xg)}) {
        const ops::Fp8PerGroup got = ops::quantize_fp8_per_group(in);
        EXPECT_TRUE(same_bytes(got.q, want.q)) << shape.str() << " " << dtype_name(dt);
        EXPECT_TRUE(same_bytes(got.group_scale, want.group_scale)) << shape.str();
      }
    }
  }
}

// The GPU's linear against the CPU's on the same quantised weight. Both sum the same e4m3
// products per group of 128 and scale them in f32; inside a group the tensor cores add in their
// own order and precision (Hopper's FP8 MMA keeps about 14 mantissa bits until the partial sum is
// promoted to f32), so f32 outputs agree to 1e-3 of the largest output, and a bf16 output to one
// bf16 rounding step (2^-8) more. A wrong scale, layout or padding is O(1); one e4m3 step is 6%.
void expect_linear_matches(int64_t rows, int64_t in, int64_t out, DType dt, DType bias_dt,
                           uint64_t seed) {
  const ops::Fp8Blockwise w =
      ops::quantize_fp8_blockwise(test::random_tensor({out, in}, seed, -0.1f, 0.1f));
  const Tensor x = activations({rows, in}, seed + 1, dt, false);
  const Tensor bias = bias_dt == DType::U8 ? Tensor()
                                           : test::random_tensor({out}, seed + 2).to(bias_dt);
  const Tensor want = ops::linear_fp8_blockwise(x, w.weight, w.weight_scale, bias);
  const Tensor got = ops::linear_fp8_blockwise(x.to(kGpu), w.weight.to(kGpu),
                                               w.weight_scale.to(kGpu),
                                               bias.defined() ? bias.to(kGpu) : Tensor());
  ASSERT_EQ(got.dtype(), dt);
  ASSERT_EQ(got.shape(), want.shape());
  const double rel = test::rel_l2(got, want), worst = test::max_rel_err(got, want);
  std::printf("[fp8-blockwise linear] x [%ld, %ld] -> %ld %s bias %s: rel_l2 %.3e max %.3e\n",
              static_cast<long>(rows), static_cast<long>(in), static_cast<long>(out),
              dtype_name(dt), bias.defined() ? dtype_name(bias_dt) : "none", rel, worst);
  const double bound = dt == DType::F32 ? 1e-3 : 8e-3;
  EXPECT_LE(worst, bound) << rows << "x" << in << "->" << out;
  EXPECT_LE(rel, bound) << rows << "x" << in << "->" << out;
}

TEST(CudaFp8Blockwise, LinearMatchesTheCpuOnSmallShapesWithPartialTiles) {
  LTX_REQUIRE_HOPPER();
  uint64_t seed = 100;
  // (rows, in, out): one tile; several tiles; a last group of 64 inputs and a last tile of 16
  // outputs (zero-padded tiles); fewer than 128 inputs (the tiny models); rows not a multiple of
  // 4; dims not even multiples of 16.
  const int64_t shapes[][3] = {{4, 128, 128}, {5, 256, 384}, {77, 320, 144},
                               {3, 64, 32},   {1, 32, 256},  {6, 200, 130}};
  for (const auto& s : shapes)
    for (const DType dt : {DType::BF16, DType::F32})
      for (const DType bias : {DType::U8, DType::BF16, DType::F32})  // U8: no bias
        expect_linear_matches(s[0], s[1], s[2], dt, bias, seed += 3);
}

TEST(CudaFp8Blockwise, LinearMatchesTheCpuOnA4096Layer) {
  LTX_REQUIRE_HOPPER();
  expect_linear_matches(256, 4096, 4096, DType::BF16, DType::BF16, 500);
  expect_linear_matches(130, 4096, 4096, DType::F32, DType::U8, 510);
}

TEST(CudaFp8Blockwise, LinearBindsOnTheGpuAsOnTheCpu) {
  LTX_REQUIRE_HOPPER();
  const std::string module = "transformer_blocks.0.ff.net.0.proj";
  const int64_t in = 256, out = 384;
  const auto make = [&] {
    io::WeightMap w;
    w.add(module + ".weight", test::random_tensor({out, in}, 33, -0.2f, 0.2f).to(DType::BF16));
    w.add(module + ".bias", test::random_tensor({out}, 34, -0.2f, 0.2f).to(DType::BF16));
    return w;
  };
  io::WeightMap wc = make(), wg = make();
  io::WeightMap sc = wc.scoped("transformer_blocks.0.ff.net.0."),
                sg = wg.scoped("transformer_blocks.0.ff.net.0.");
  const nn::Linear cpu =
      nn::Linear::load(sc, "proj", in, out, true, {DType::BF16, Device::cpu(), Mode::Fp8Blockwise});
  const nn::Linear gpu =
      nn::Linear::load(sg, "proj", in, out, true, {DType::BF16, kGpu, Mode::Fp8Blockwise});
  ASSERT_EQ(gpu.format, nn::LinearFormat::Fp8Blockwise);
  ASSERT_TRUE(gpu.weight.device().is_cuda() && gpu.weight_scale.device().is_cuda());
  EXPECT_TRUE(same_bytes(gpu.weight, cpu.weight));
  EXPECT_TRUE(same_bytes(gpu.weight_scale, cpu.weight_scale));
  const Tensor x = activations({2, 77, in}, 35, DType::BF16, false);
  EXPECT_LE(test::max_rel_err(gpu(x.to(kGpu)), cpu(x)), 8e-3);
  // The CPU computes elementwise ops in f32 only: its GELU runs on the widened linear output.
  EXPECT_LE(test::max_rel_err(gpu.gelu_tanh(x.to(kGpu)), ops::gelu_tanh(cpu(x).to(DType::F32))),
            2e-2);
}

TEST(CudaFp8Blockwise, LoraRuleFusesOnTheGpuAsOnTheCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  const ops::Fp8Blockwise w = ops::quantize_fp8_blockwise(test::random_tensor({200, 384}, 41));
  const Tensor delta = test::random_tensor({200, 384}, 42, -0.01f, 0.01f).to(DType::BF16).to(DType::F32);
  const ops::Fp8Blockwise want = ops::fuse_delta_fp8_blockwise(w.weight, w.weight_scale, delta);
  const ops::Fp8Blockwise got = ops::fuse_delta_fp8_blockwise(
      w.weight.to(kGpu), w.weight_scale.to(kGpu), delta.to(kGpu));
  EXPECT_TRUE(same_bytes(got.weight, want.weight));
  EXPECT_TRUE(same_bytes(got.weight_scale, want.weight_scale));
}

// The tiny model's layers have 32 to 256 features: partial tiles, zero-padded for the GEMM.
// f32: the quantisations are the CPU's until the
// GEMM's partial sums move a value across an e4m3 rounding boundary of the next layer (one step,
// 6%, for a few values), as for fp8-scaled-mm (fp8_scaled_test.cpp): 2e-2. bf16 compute adds its
// own rounding: 4e-2. A wrong scale or a layout error is O(1).
TEST(CudaFp8Blockwise, TinyTransformerMatchesTheCpuRun) {
  LTX_REQUIRE_HOPPER();
  test::TempDir dir;
  test::expect_tiny_transformer_matches_cpu(dir, test::fixture("ltx23.weights.bf16.safetensors"),
                                            Mode::Fp8Blockwise, {2e-2, 4e-2});
}

}  // namespace
}  // namespace ltx

// Local to this file (unity builds compile it together with others).
#undef LTX_REQUIRE_HOPPER
