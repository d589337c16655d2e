// NVFP4 on CUDA against the CPU: the quantiser and the dequantiser bit for bit, the NVFP4 Linear
// (quantised on the GPU at load, dequantised to bf16 at each forward), and the tiny LTX-2.3
// transformer under nvfp4-cast (f32 and bf16 compute) against the CPU's nvfp4-cast run.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <memory>
#include <string>
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
#include "ops/linalg.h"
#include "ops/nvfp4.h"
#include "parity/parity.h"
#include "support/test_support.h"

namespace ltx::nvfp4_test {
namespace {

using quantization::Mode;

// Rows past one 128-row tile, in/16 = 17 scale columns padded to 20; blocks of widely different
// magnitude, an all-zero block, and a few values at the bf16 extremes.
Tensor awkward_weight(DType dtype) {
  const int64_t out = 300, in = 272;
  std::vector<float> v = test::random_tensor({out, in}, 31, -0.2f, 0.2f).to_float_vector();
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t c = 0; c < 16; ++c) v[r * in + c] *= 1e-4f;
    for (int64_t c = 16; c < 32; ++c) v[r * in + c] = r % 7 == 0 ? 0.0f : v[r * in + c] * 30.0f;
  }
  v[5 * in + 100] = 3.0e38f;
  v[6 * in + 101] = -std::numeric_limits<float>::infinity();
  return Tensor::from_vector(v, {out, in}).to(dtype);
}

TEST(CudaNvfp4, QuantizeMatchesTheCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  for (DType dtype : {DType::BF16, DType::F32}) {
    for (bool extremes : {false, true}) {
      Tensor w = awkward_weight(dtype);
      if (!extremes) w = w.narrow(0, 7, 200);  // without the rows holding 3e38 and -inf
      const ops::Nvfp4Weight cpu = ops::quantize_nvfp4(w);
      const ops::Nvfp4Weight gpu = ops::quantize_nvfp4(w.to(test::kGpu));
      ASSERT_TRUE(gpu.packed.device().is_cuda());
      EXPECT_TRUE(test::same_bytes(gpu.tensor_scale, cpu.tensor_scale)) << dtype_name(dtype);
      EXPECT_TRUE(test::same_bytes(gpu.block_scales, cpu.block_scales)) << dtype_name(dtype);
      EXPECT_TRUE(test::same_bytes(gpu.packed, cpu.packed)) << dtype_name(dtype);
    }
  }
}

TEST(CudaNvfp4, DequantizeMatchesTheCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  const ops::Nvfp4Weight cpu = ops::quantize_nvfp4(awkward_weight(DType::BF16).narrow(0, 7, 200));
  const ops::Nvfp4Weight gpu{cpu.packed.to(test::kGpu), cpu.block_scales.to(test::kGpu),
                             cpu.tensor_scale.to(test::kGpu)};
  for (DType dtype : {DType::BF16, DType::F32})
    EXPECT_TRUE(test::same_bytes(ops::dequantize_nvfp4(gpu, dtype), ops::dequantize_nvfp4(cpu, dtype)))
        << dtype_name(dtype);
  // A packed weight at an offset that is not 8-byte aligned (a view into a larger buffer).
  const Tensor big = Tensor::empty({cpu.packed.numel() + 3}, DType::U8);
  big.narrow(0, 3, cpu.packed.numel()).view(cpu.packed.shape()).copy_from(cpu.packed);
  const Tensor big_gpu = big.to(test::kGpu);
  const ops::Nvfp4Weight odd{big_gpu.narrow(0, 3, cpu.packed.numel()).view(cpu.packed.shape()),
                             gpu.block_scales, gpu.tensor_scale};
  EXPECT_TRUE(test::same_bytes(ops::dequantize_nvfp4(odd, DType::BF16),
                               ops::dequantize_nvfp4(cpu, DType::BF16)));
}

io::WeightMap linear_map(const std::string& module, int64_t in, int64_t out) {
  io::WeightMap w;
  w.add(module + ".weight", test::random_tensor({out, in}, 21, -0.2f, 0.2f).to(DType::BF16));
  w.add(module + ".bias", test::random_tensor({out}, 22, -0.2f, 0.2f).to(DType::BF16));
  return w;
}

TEST(CudaNvfp4, LinearDequantisesOnTheGpuAndMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  const std::string module = "transformer_blocks.0.ff.net.0.proj";
  const int64_t in = 256, out = 384;
  io::WeightMap wc = linear_map(module, in, out), wg = linear_map(module, in, out);
  io::WeightMap sc = wc.scoped("transformer_blocks.0.ff.net.0."),
                sg = wg.scoped("transformer_blocks.0.ff.net.0.");
  const nn::Linear cpu = nn::Linear::load(sc, "proj", in, out, true,
                                          {DType::F32, Device::cpu(), Mode::Nvfp4Cast});
  const nn::Linear gpu = nn::Linear::load(sg, "proj", in, out, true,
                                          {DType::BF16, test::kGpu, Mode::Nvfp4Cast});
  ASSERT_EQ(gpu.format, nn::LinearFormat::Nvfp4);
  ASSERT_TRUE(gpu.weight.device().is_cuda());
  // Quantised on the GPU at load: the same bytes as the CPU's.
  EXPECT_TRUE(test::same_bytes(gpu.weight, cpu.weight));
  EXPECT_TRUE(test::same_bytes(gpu.block_scales, cpu.block_scales));
  EXPECT_TRUE(test::same_bytes(gpu.tensor_scale, cpu.tensor_scale));

  const Tensor x = test::random_tensor({2, 77, in}, 23);
  const Tensor xg = x.to(test::kGpu, DType::BF16);
  // On the GPU: exactly the dense bf16 ops on the dequantised weight.
  const Tensor wb = gpu.dense_weight(DType::BF16), bb = gpu.bias.to(DType::BF16);
  EXPECT_TRUE(test::same_bytes(gpu(xg), ops::linear(xg, wb, bb)));
  EXPECT_TRUE(test::same_bytes(gpu.gelu_tanh(xg), ops::linear_gelu_tanh(xg, wb, bb)));
  // Against the CPU's f32 NVFP4 Linear on the bf16-rounded input: bf16 rounding of the weight
  // and the output.
  const Tensor xr = x.to(DType::BF16).to(DType::F32);
  EXPECT_LE(parity::compare(gpu(xg).to(Device::cpu(), DType::F32), cpu(xr)).rel_l2, 1e-2);
  EXPECT_LE(parity::compare(gpu.gelu_tanh(xg).to(Device::cpu(), DType::F32), cpu.gelu_tanh(xr)).rel_l2,
            1e-2);
}

TEST(CudaNvfp4, TinyTransformerMatchesTheCpuNvfp4CastRun) {
  LTX_REQUIRE_CUDA();
  // The same NVFP4 weights on both (quantised bit for bit alike, dequantised exactly in f32):
  // f32 compute agrees as the dense f32 runs do (1e-4), bf16 compute within bf16 rounding of the
  // weights and activations (2e-2).
  test::TempDir dir;
  test::expect_tiny_transformer_matches_cpu(dir, test::fixture("ltx23.weights.bf16.safetensors"),
                                            Mode::Nvfp4Cast, {1e-4, 2e-2});
}

// The nvfp4 LoRA rule on the GPU (dequantise, the delta in bf16, quantise again) gives the CPU's
// bits: every step is an op whose CUDA and CPU versions agree bit for bit.
TEST(CudaNvfp4, LoraFusesOnTheGpuAsTheCpuAndResetsBitForBit) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  const std::string q = "transformer_blocks.0.attn1.to_q";
  const std::string lora_path = dir.file("lora.safetensors");
  io::write_safetensors(
      lora_path,
      {{"diffusion_model." + q + ".lora_A.weight", test::random_tensor({9, 64}, 1).to(DType::BF16)},
       {"diffusion_model." + q + ".lora_B.weight", test::random_tensor({64, 9}, 2).to(DType::BF16)}});
  const lora::LoraSet set = {{lora::LoraFile::open(lora_path), 0.7}};
  namespace tf = models::transformer;
  const auto fused = [&](Device device, DType dtype) {
    io::WeightMap w({io::SafetensorsFile::open(test::fixture("ltx23.weights.bf16.safetensors"))},
                    tf::transformer_key_map(tf::LTXModelType::AudioVideo));
    auto fuser = std::make_unique<lora::Fuser>(w, std::vector<lora::LoraSet>{set},
                                               nn::LoadOptions{dtype, device, Mode::Nvfp4Cast});
    std::vector<Tensor> base, out;
    for (const char* suffix : {".weight", ".weight_scale", ".weight_scale_2"})
      base.push_back(fuser->bound(q + suffix).to(Device::cpu()).clone());
    fuser->apply(set);
    for (const char* suffix : {".weight", ".weight_scale", ".weight_scale_2"})
      out.push_back(fuser->bound(q + suffix).to(Device::cpu()).clone());
    EXPECT_FALSE(test::same_bytes(out[0], base[0])) << "the LoRA changed nothing";
    fuser->reset();
    for (int i = 0; i < 3; ++i) {
      const char* suffix = i == 0 ? ".weight" : i == 1 ? ".weight_scale" : ".weight_scale_2";
      EXPECT_TRUE(test::same_bytes(fuser->bound(q + suffix).to(Device::cpu()), base[i])) << suffix;
    }
    return out;
  };
  const std::vector<Tensor> cpu = fused(Device::cpu(), DType::F32);
  const std::vector<Tensor> gpu = fused(test::kGpu, DType::BF16);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(test::same_bytes(gpu[i], cpu[i])) << i;
}

}  // namespace
}  // namespace ltx::nvfp4_test
