// Linear layers on GGML blocks on CUDA against the CPU (ops/ggml_linear.h): the dequantising
// kernel bit for bit for every type, the products of every type, a 4096-wide layer, the chunked
// path for weights larger than one scratch, the GELU epilogue, and the tiny transformer from a
// GGUF file (against the CPU; streamed blocks and a LoRA's low-rank term against the resident
// model).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/ggml_linear.h"
#include "cuda/cuda_test_util.h"
#include "cuda/tiny_transformer_modes.h"
#include "generate/model_provider.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/transformer/model.h"
#include "nn/linear.h"
#include "ops/elementwise.h"
#include "ops/ggml_linear.h"
#include "ops/linalg.h"
#include "support/ggml_weights.h"
#include "support/test_support.h"

namespace ltx::ggml_linear_test {
namespace {

using test::kGpu;
using test::random_ggml_weight;
using test::random_tensor;

ops::GgmlWeight on_gpu(const ops::GgmlWeight& w) { return {w.blocks.to(kGpu), w.type, w.in_features}; }

// max |a - b| relative to max |b|, both brought to the host in f32.
double rel_diff(const Tensor& a, const Tensor& b) {
  const Tensor a32 = a.to(Device::cpu(), DType::F32), b32 = b.to(Device::cpu(), DType::F32);
  double ref = 0;
  for (float v : b32.to_float_vector()) ref = std::max(ref, static_cast<double>(std::fabs(v)));
  return test::max_abs_diff(a32, b32) / std::max(ref, 1e-30);
}

// The CPU's product for a bf16 GPU input: the same bf16 values in f32.
Tensor cpu_product(const Tensor& x, const ops::GgmlWeight& w, const Tensor& bias) {
  return ops::linear_ggml(x.to(Device::cpu(), DType::F32), w,
                          bias.defined() ? bias.to(Device::cpu(), DType::F32) : Tensor());
}

TEST(CudaGgmlLinear, DequantisesEveryTypeBitForBitAsTheCpu) {
  LTX_REQUIRE_CUDA();
  for (GgmlType type : test::ggml_compute_types()) {
    SCOPED_TRACE(ggml_type_name(type));
    // Dense types with an odd value count (the kernel's scalar tail); more than one tile.
    const int64_t in = test::ggml_row_len(type, ops::ggml::block_elems(type) == 1 ? 4099 : 33);
    const ops::GgmlWeight w = random_ggml_weight(type, 37, in, 101);
    const ops::GgmlWeight g = on_gpu(w);
    for (DType dtype : {DType::F32, DType::BF16, DType::F16})
      EXPECT_TRUE(test::same_bytes(ops::dequantize_ggml(g, dtype), ops::dequantize_ggml(w, dtype)))
          << dtype_name(dtype);
    // A range of rows starts at its own row.
    EXPECT_TRUE(test::same_bytes(cuda::dequantize_ggml(g, 5, 9, DType::F32),
                                 ops::dequantize_ggml(w, DType::F32).narrow(0, 5, 9)));
  }
}

TEST(CudaGgmlLinear, MatchesTheCpuForEveryType) {
  LTX_REQUIRE_CUDA();
  for (GgmlType type : test::ggml_compute_types()) {
    SCOPED_TRACE(ggml_type_name(type));
    const int64_t out = 40, in = test::ggml_row_len(type, ops::ggml::block_elems(type) == 1 ? 96 : 2);
    const ops::GgmlWeight w = random_ggml_weight(type, out, in, 111);
    const ops::GgmlWeight g = on_gpu(w);
    const Tensor x = random_tensor({2, 9, in}, 112).to(kGpu, DType::BF16);
    const Tensor bias = random_tensor({out}, 113).to(kGpu, DType::BF16);
    const Tensor y = ops::linear_ggml(x, g, bias);
    EXPECT_EQ(y.dtype(), DType::BF16);
    // One chunk: exactly the dense GEMM by the dequantised weight.
    EXPECT_TRUE(test::same_bytes(y, ops::linear(x, ops::dequantize_ggml(g, DType::BF16), bias)));
    // The CPU's f32 product, within the bf16 weight and output roundings.
    EXPECT_LT(rel_diff(y, cpu_product(x, w, bias)), 2e-2);
    // f32 activations: an f32 GEMM on both sides.
    const Tensor x32 = x.to(DType::F32);
    EXPECT_LT(rel_diff(ops::linear_ggml(x32, g, bias.to(DType::F32)), cpu_product(x32, w, bias)), 1e-5);
  }
}

TEST(CudaGgmlLinear, WideLayersMatchTheCpu) {
  LTX_REQUIRE_CUDA();
  struct Case {
    GgmlType type;
    int64_t rows, out, in;
  };
  for (const Case& c : {Case{GgmlType::Q4_K, 33, 4096, 4096}, Case{GgmlType::Q8_0, 33, 4096, 4096},
                        Case{GgmlType::Q6_K, 130, 300, 1024}, Case{GgmlType::Q5_0, 5, 96, 256}}) {
    SCOPED_TRACE(std::string(ggml_type_name(c.type)) + " " + std::to_string(c.out) + "x" +
                 std::to_string(c.in));
    const ops::GgmlWeight w = random_ggml_weight(c.type, c.out, c.in, 121);
    const Tensor x = random_tensor({c.rows, c.in}, 122).to(kGpu, DType::BF16);
    const Tensor bias = random_tensor({c.out}, 123).to(kGpu, DType::BF16);
    EXPECT_LT(rel_diff(ops::linear_ggml(x, on_gpu(w), bias), cpu_product(x, w, bias)), 2e-2);
  }
}

TEST(CudaGgmlLinear, WeightsLargerThanTheScratchGoInChunksOfRows) {
  LTX_REQUIRE_CUDA();
  const int64_t out = 300, in = 512;
  const ops::GgmlWeight w = random_ggml_weight(GgmlType::Q4_1, out, in, 131);
  const ops::GgmlWeight g = on_gpu(w);
  const Tensor x = random_tensor({3, 7, in}, 132).to(kGpu, DType::BF16);
  const Tensor bias = random_tensor({out}, 133).to(kGpu, DType::BF16);
  const int64_t scratch = 128 * in * 2;  // chunks of 128, 128 and 44 rows
  for (bool gelu : {false, true}) {
    SCOPED_TRACE(gelu ? "gelu" : "linear");
    const Tensor whole = cuda::linear_ggml(x, g, bias, gelu);
    const Tensor chunked = cuda::linear_ggml(x, g, bias, gelu, scratch);
    EXPECT_EQ(chunked.shape(), Shape({3, 7, out}));
    Tensor want = cpu_product(x, w, bias);
    if (gelu) want = ops::gelu_tanh(want);
    EXPECT_LT(rel_diff(whole, want), 2e-2);
    EXPECT_LT(rel_diff(chunked, want), 2e-2);
  }
  // f32 activations with an f32 bias in chunks: the f32 GEMM, close to the CPU's.
  const Tensor x32 = x.to(DType::F32), b32 = bias.to(DType::F32);
  EXPECT_LT(rel_diff(cuda::linear_ggml(x32, g, b32, false, 128 * in * 4), cpu_product(x32, w, b32)),
            1e-5);
}

TEST(CudaGgmlLinear, GeluVariantMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  const ops::GgmlWeight w = random_ggml_weight(GgmlType::Q3_K, 64, 512, 141);
  const Tensor x = random_tensor({17, 512}, 142).to(kGpu, DType::BF16);
  const Tensor bias = random_tensor({64}, 143).to(kGpu, DType::BF16);
  EXPECT_LT(rel_diff(ops::linear_ggml_gelu_tanh(x, on_gpu(w), bias),
                     ops::gelu_tanh(cpu_product(x, w, bias))),
            2e-2);
}

TEST(CudaGgmlLinear, TinyGgufTransformerMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  // The community-style file (Q8_0 / Q4_0 Linears, F32 tables) through `ltx parity transformer`:
  // f32 on the GPU is the CPU's product in another summation order; bf16 rounds the dequantised
  // weights and every activation (the bounds of the dense fp8-cast run's bf16 compute).
  test::TempDir dir;
  test::expect_tiny_transformer_matches_cpu(dir, test::fixture("gguf/ltx23_tiny.gguf"),
                                            quantization::Mode::None, {1e-4, 2e-2});
}

// The tiny transformer's fixture inputs on the GPU, in the model dtype where the pipelines pass it.
models::transformer::Modality gpu_stream(const io::SafetensorsFile& io, const std::string& stream) {
  const std::string p = "in." + stream + ".";
  models::transformer::Modality m;
  m.latent = io.tensor(p + "latent").to(kGpu, DType::BF16);
  m.sigma = io.tensor(p + "sigma").to(kGpu, DType::F32);
  m.timesteps = io.tensor(p + "timesteps").to(kGpu, DType::F32);
  m.positions = io.tensor(p + "positions").to(kGpu, DType::F32);
  m.context = io.tensor(p + "context").to(kGpu, DType::BF16);
  return m;
}

void expect_same_outputs(const models::transformer::ModelOutputs& got,
                         const models::transformer::ModelOutputs& want) {
  ASSERT_TRUE(got.video.defined() && want.video.defined() && got.audio.defined() &&
              want.audio.defined());
  EXPECT_TRUE(test::same_bytes(got.video, want.video)) << "video velocity";
  EXPECT_TRUE(test::same_bytes(got.audio, want.audio)) << "audio velocity";
}

TEST(CudaGgmlLinear, StreamedGgufBlocksAndTheirLoraTermGiveTheResidentOutputsBitForBit) {
  LTX_REQUIRE_CUDA();
  namespace tf = models::transformer;
  const std::string path = test::fixture("gguf/ltx23_tiny.gguf");
  const io::SafetensorsFile io(test::fixture("ltx23.io.safetensors"));
  const tf::Modality video = gpu_stream(io, "video"), audio = gpu_stream(io, "audio");
  const nn::LoadOptions gpu{DType::BF16, kGpu};

  // A LoRA on a Q8_0 block projection, a Q4_0 feed-forward input and a dense layer.
  test::TempDir dir;
  io::WeightMap shapes = io::WeightMap::open_checkpoints(
      {path}, tf::transformer_key_map(tf::LTXModelType::AudioVideo));
  std::vector<std::pair<std::string, Tensor>> factors;
  uint64_t seed = 150;
  for (const char* target : {"transformer_blocks.0.attn1.to_q", "transformer_blocks.1.ff.net.0.proj",
                             "audio_patchify_proj"}) {
    const Shape s = shapes.shape(std::string(target) + ".weight");
    factors.emplace_back(str("diffusion_model.", target, ".lora_A.weight"),
                         random_tensor({2, s[1]}, seed++, -0.5f, 0.5f).to(DType::BF16));
    factors.emplace_back(str("diffusion_model.", target, ".lora_B.weight"),
                         random_tensor({s[0], 2}, seed++, -0.5f, 0.5f).to(DType::BF16));
  }
  const std::string lora_path = dir.file("lora.safetensors");
  io::write_safetensors(lora_path, factors);
  const lora::LoraSet set = {{lora::LoraFile::open(lora_path), 0.8}};

  const auto resident = generate::load_stage_transformer(path, {set}, gpu, {});
  const tf::ModelOutputs want_base = resident->model->forward(&video, &audio, nullptr);
  resident->fuser->apply(set);
  const tf::ModelOutputs want_lora = resident->model->forward(&video, &audio, nullptr);
  EXPECT_FALSE(test::same_bytes(want_lora.video, want_base.video)) << "the LoRA changed nothing";
  // The blocks' u8 rows, biases and low-rank factors travel through the slots as they are.
  for (bool from_file : {false, true}) {
    SCOPED_TRACE(from_file ? "disk" : "cpu");
    const auto st = generate::load_stage_transformer(path, {set}, gpu, {2, from_file});
    ASSERT_TRUE(st->model->streams_blocks());
    for (int pass = 0; pass < 2; ++pass)
      expect_same_outputs(st->model->forward(&video, &audio, nullptr), want_base);
    st->fuser->apply(set);
    expect_same_outputs(st->model->forward(&video, &audio, nullptr), want_lora);
    st->fuser->reset();
    expect_same_outputs(st->model->forward(&video, &audio, nullptr), want_base);
  }
}

}  // namespace
}  // namespace ltx::ggml_linear_test
