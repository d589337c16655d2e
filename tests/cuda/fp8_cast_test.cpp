// --quantization fp8-cast on CUDA against the CPU: the e4m3 <-> bf16 casts the upcast and the
// load make, the fp8-cast Linear (plain and with the fused GELU), and the tiny LTX-2.3
// transformer under fp8-cast (f32 and bf16 compute) against the CPU's fp8-cast run.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "cuda/tiny_transformer_modes.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "nn/linear.h"
#include "ops/linalg.h"
#include "parity/parity.h"
#include "support/test_support.h"

namespace ltx::fp8_cast_test {
namespace {

using quantization::Mode;

TEST(CudaFp8Cast, E4m3ToBf16AndF32MatchTheCpuForEveryBitPattern) {
  LTX_REQUIRE_CUDA();
  // All 256 codes (NaNs, subnormals, +-448), repeated into a tensor large enough for every
  // vector path of the conversion kernel, and an odd-sized tail.
  std::vector<uint8_t> codes(256 * 41 + 7);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i * 37 + i / 256);
  Tensor host = Tensor::empty({static_cast<int64_t>(codes.size())}, DType::F8E4M3FN);
  std::memcpy(host.raw_data(), codes.data(), codes.size());
  const Tensor dev = host.to(test::kGpu);
  for (DType to : {DType::BF16, DType::F32, DType::F16}) {
    EXPECT_TRUE(test::same_bytes(dev.to(to), host.to(to))) << dtype_name(to);
  }
  // A strided view (every other code) converts like the CPU too.
  const auto every_other = [](const Tensor& t) {
    return t.narrow(0, 0, 256 * 40).view({-1, 2}).select(1, 0);
  };
  EXPECT_TRUE(
      test::same_bytes(every_other(dev).to(DType::BF16), every_other(host).to(DType::BF16)));
}

TEST(CudaFp8Cast, Bf16ToE4m3OnTheDeviceMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  // The load's cast of bf16 weights (file -> GPU -> e4m3), including values past the e4m3 range.
  const Tensor bf16 = test::random_tensor({333, 97}, 11, -600.f, 600.f).to(DType::BF16);
  const Tensor small = test::random_tensor({333, 97}, 12, -0.05f, 0.05f).to(DType::BF16);
  for (const Tensor& t : {bf16, small})
    EXPECT_TRUE(test::same_bytes(t.to(test::kGpu).to(DType::F8E4M3FN), t.to(DType::F8E4M3FN)));
}

// A map with one fp8-cast Linear (bf16 as in checkpoints).
io::WeightMap linear_map(const std::string& module, int64_t in, int64_t out) {
  io::WeightMap w;
  w.add(module + ".weight", test::random_tensor({out, in}, 21, -0.2f, 0.2f).to(DType::BF16));
  w.add(module + ".bias", test::random_tensor({out}, 22, -0.2f, 0.2f).to(DType::BF16));
  return w;
}

TEST(CudaFp8Cast, LinearUpcastsOnTheGpuAndMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  const std::string module = "transformer_blocks.0.ff.net.0.proj";
  const int64_t in = 256, out = 384;
  io::WeightMap wc = linear_map(module, in, out), wg = linear_map(module, in, out);
  io::WeightMap sc = wc.scoped("transformer_blocks.0.ff.net.0."),
                sg = wg.scoped("transformer_blocks.0.ff.net.0.");
  const nn::Linear cpu = nn::Linear::load(sc, "proj", in, out, true,
                                          {DType::F32, Device::cpu(), Mode::Fp8Cast});
  const nn::Linear gpu = nn::Linear::load(sg, "proj", in, out, true,
                                          {DType::BF16, test::kGpu, Mode::Fp8Cast});
  ASSERT_EQ(gpu.format, nn::LinearFormat::Fp8Cast);
  ASSERT_EQ(gpu.weight.dtype(), DType::F8E4M3FN);
  ASSERT_TRUE(gpu.weight.device().is_cuda());
  // The GPU holds the same e4m3 bytes as the CPU.
  EXPECT_TRUE(test::same_bytes(gpu.weight, cpu.weight));
  EXPECT_TRUE(test::same_bytes(gpu.bias, cpu.bias));

  const Tensor x = test::random_tensor({2, 77, in}, 23);
  const Tensor xg = x.to(test::kGpu, DType::BF16);
  // On the GPU: exactly the dense bf16 ops on the upcast weights (the fused GELU GEMM included).
  const Tensor wb = gpu.weight.to(DType::BF16), bb = gpu.bias.to(DType::BF16);
  EXPECT_TRUE(test::same_bytes(gpu(xg), ops::linear(xg, wb, bb)));
  EXPECT_TRUE(test::same_bytes(gpu.gelu_tanh(xg), ops::linear_gelu_tanh(xg, wb, bb)));
  // Against the CPU's f32 fp8-cast Linear on the bf16-rounded input: bf16 output rounding.
  const Tensor xr = x.to(DType::BF16).to(DType::F32);
  EXPECT_LE(test::max_rel_err(gpu(xg), cpu(xr)), 1e-2);
  EXPECT_LE(test::max_rel_err(gpu.gelu_tanh(xg), cpu.gelu_tanh(xr)), 1e-2);
}

TEST(CudaFp8Cast, TinyTransformerMatchesTheCpuFp8CastRun) {
  LTX_REQUIRE_CUDA();
  // Same e4m3 weights upcast exactly on both: f32 compute agrees as the dense f32 runs do
  // (1e-4, transformer_parity_test), bf16 compute within bf16 rounding (2e-2).
  test::TempDir dir;
  test::expect_tiny_transformer_matches_cpu(dir, test::fixture("ltx23.weights.bf16.safetensors"),
                                            Mode::Fp8Cast, {1e-4, 2e-2});
}

}  // namespace
}  // namespace ltx::fp8_cast_test
