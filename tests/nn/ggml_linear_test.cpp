// nn::Linear on a GGUF file's block-quantized weights (LinearFormat::GgmlBlocks): bound as stored,
// the product of the dequantised weight, ComfyUI-GGUF's reshaped tensors, the low-rank LoRA term,
// what for_each_parameter visits, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "io/gguf.h"
#include "io/gguf_builder.h"
#include "io/io_test_util.h"
#include "io/weights.h"
#include "nn/linear.h"
#include "ops/elementwise.h"
#include "ops/ggml_linear.h"
#include "ops/linalg.h"
#include "quantization/ggml_dequant.h"
#include "quantization/mode.h"
#include "support/ggml_weights.h"
#include "support/test_support.h"

namespace ltx {
namespace {

std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.raw_data()), c.nbytes());
}

// A GGUF file holding layer "l": its weight [out, in] as `w`'s blocks (stored with rows of
// `stored_row` values, ComfyUI-GGUF's reshape, when given) and an f32 bias.
std::string write_layer(const test::TempDir& dir, const ops::GgmlWeight& w, int64_t stored_row = 0) {
  test::GgufBuilder b;
  const int64_t out = w.out_features(), in = w.in_features;
  const uint64_t row = static_cast<uint64_t>(stored_row > 0 ? stored_row : in);
  const uint64_t rows = static_cast<uint64_t>(out * in) / row;
  if (stored_row > 0)
    b.kv_i32_array("comfy.gguf.orig_shape.l.weight",
                   {static_cast<int32_t>(out), static_cast<int32_t>(in)});
  b.tensor("l.weight", {row, rows}, static_cast<int32_t>(w.type), bytes_of(w.blocks));
  b.tensor("l.bias", {static_cast<uint64_t>(out)}, 0,
           bytes_of(test::random_tensor({out}, 7)));
  const std::string path = dir.file("layer.gguf");
  test::write_bytes(path, b.bytes());
  return path;
}

TEST(GgmlLinearLayer, BindsTheFileBlocksAsStoredAndMultipliesByTheirValues) {
  test::TempDir dir;
  const ops::GgmlWeight q = test::random_ggml_weight(GgmlType::Q4_K, 6, 512, 1);
  const std::string path = write_layer(dir, q);
  const auto file = io::GgufFile::open(path);
  io::WeightMap w({file});
  const nn::Linear l = nn::Linear::load(w, "l", 512, 6, true, {});
  w.finish("layer");
  ASSERT_EQ(l.format, nn::LinearFormat::GgmlBlocks);
  EXPECT_EQ(l.ggml_type, GgmlType::Q4_K);
  EXPECT_EQ(l.in_features(), 512);
  EXPECT_EQ(l.out_features(), 6);
  EXPECT_EQ(l.dtype(), DType::F32);
  // A view of the file mapping, not a copy.
  EXPECT_EQ(l.weight.raw_data(), static_cast<const void*>(file->tensor_bytes("l.weight")));
  EXPECT_EQ(bytes_of(l.weight), bytes_of(q.blocks));
  const Tensor dense = quantization::dequantize(file->ggml_tensor("l.weight"));
  EXPECT_EQ(bytes_of(l.dense_weight(DType::F32)), bytes_of(dense));
  const Tensor x = test::random_tensor({3, 512}, 2);
  EXPECT_LT(test::max_rel_err(l(x), ops::linear(x, dense, l.bias)), 1e-5);
  EXPECT_LT(test::max_rel_err(l.gelu_tanh(x), ops::gelu_tanh(ops::linear(x, dense, l.bias))), 1e-5);
  // Moving a block's weights between devices visits the blocks and the bias.
  std::vector<std::string> roles;
  l.for_each_parameter([&](const char* role, const Tensor& t) {
    roles.push_back(role);
    if (std::string(role) == "weight") {
      EXPECT_EQ(t.dtype(), DType::U8);
    }
  });
  EXPECT_EQ(roles, (std::vector<std::string>{"weight", "bias"}));
}

TEST(GgmlLinearLayer, ReadsATensorReshapedBeforeQuantizingAsItsLogicalRows) {
  // ComfyUI-GGUF stores some weights as rows of 256 and records the shape: blocks of whole
  // layer rows still dequantise a row group at a time.
  test::TempDir dir;
  const ops::GgmlWeight q = test::random_ggml_weight(GgmlType::Q8_0, 8, 64, 3);
  io::WeightMap w = io::WeightMap::open({write_layer(dir, q, 256)});
  ASSERT_EQ(w.shape("l.weight"), Shape({8, 64}));
  const nn::Linear l = nn::Linear::load(w, "l", 64, 8, true, {});
  ASSERT_EQ(l.format, nn::LinearFormat::GgmlBlocks);
  const Tensor x = test::random_tensor({2, 64}, 4);
  EXPECT_LT(test::max_rel_err(l(x), ops::linear(x, ops::dequantize_ggml(q, DType::F32), l.bias)), 1e-5);
}

TEST(GgmlLinearLayer, LowRankTermEqualsTheLayerWithTheProductAddedToItsWeight) {
  const ops::GgmlWeight q = test::random_ggml_weight(GgmlType::Q5_K, 10, 256, 5);
  nn::Linear l;
  l.format = nn::LinearFormat::GgmlBlocks;
  l.weight = q.blocks;
  l.ggml_type = q.type;
  l.bias = test::random_tensor({10}, 6);
  l.lora_a = test::random_tensor({3, 256}, 7);
  l.lora_b = test::random_tensor({10, 3}, 8);
  const Tensor fused = ops::add(ops::dequantize_ggml(q, DType::F32), ops::matmul(l.lora_b, l.lora_a));
  const nn::Linear dense{fused, l.bias};
  const Tensor x = test::random_tensor({4, 256}, 9);
  EXPECT_LT(test::max_rel_err(l(x), dense(x)), 1e-5);
  EXPECT_LT(test::max_rel_err(l.gelu_tanh(x), dense.gelu_tanh(x)), 1e-5);
  std::vector<std::string> roles;
  l.for_each_parameter([&](const char* role, const Tensor&) { roles.push_back(role); });
  EXPECT_EQ(roles, (std::vector<std::string>{"weight", "bias", "lora_A", "lora_B"}));
}

TEST(GgmlLinearLayer, RefusesTypesWithoutADequantiserAndQuantizationModes) {
  test::TempDir dir;
  ops::GgmlWeight q = test::random_ggml_weight(GgmlType::Q4_0, 4, 64, 10);
  q.type = GgmlType::IQ4_NL;  // the same 18-byte blocks
  {
    io::WeightMap w = io::WeightMap::open({write_layer(dir, q)});
    test::expect_error_containing([&] { (void)nn::Linear::load(w, "l", 64, 4, true, {}); },
                                  {"layer 'l'", "IQ4_NL", "Q4_K"});
  }
  q.type = GgmlType::Q4_0;
  io::WeightMap w = io::WeightMap::open({write_layer(dir, q)});
  test::expect_error_containing(
      [&] {
        (void)nn::Linear::load(w, "l", 64, 4, true,
                               {DType::F32, Device::cpu(), quantization::Mode::Fp8Cast});
      },
      {"layer 'l'", "Q4_0", "--quantization fp8-cast", "--quantization none"});
}

}  // namespace
}  // namespace ltx
