// GGML block dequantisation (quantization/ggml_dequant.h, op_types/ggml_blocks.h): hand-computed
// blocks of every type, and bit-exact agreement with llama.cpp's gguf-py on the files it wrote
// (tests/fixtures/gguf/, tools/parity/gen_gguf_fixtures.py).
#include "quantization/ggml_dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "core/parallel.h"
#include "io/gguf.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using quantization::dequantize_rows;
using test::expect_error_containing;

constexpr uint16_t kHalfOne = 0x3C00, kHalfHalf = 0x3800, kHalfTwo = 0x4000, kHalfQuarter = 0x3400,
                   kHalfMinusOne = 0xBC00;

void put_half(std::vector<uint8_t>& b, size_t at, uint16_t h) {
  b[at] = static_cast<uint8_t>(h & 0xFF);
  b[at + 1] = static_cast<uint8_t>(h >> 8);
}

std::vector<float> dequant_block(GgmlType type, const std::vector<uint8_t>& block) {
  const GgmlTypeTraits& t = ggml_traits(type);
  EXPECT_EQ(block.size(), static_cast<size_t>(t.block_bytes));
  std::vector<float> y(static_cast<size_t>(t.block_elems));
  dequantize_rows(type, block.data(), 1, t.block_elems, y.data());
  return y;
}

// Bit-for-bit equality (so -0.0 and +0.0 differ), reporting the first mismatch.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b) {
      ADD_FAILURE() << "value " << i << ": got " << got[i] << " (0x" << std::hex << a
                    << "), want " << want[i] << " (0x" << b << ")";
      return;
    }
  }
}

TEST(GgmlBlocks, Q4_0ByHand) {
  std::vector<uint8_t> b(18, 0x88);  // nibbles of 8: value 0
  put_half(b, 0, kHalfHalf);
  b[2 + 0] = 0x0F;  // value 0: (15 - 8) * 0.5, value 16: (0 - 8) * 0.5
  b[2 + 3] = 0x80;  // value 3: (0 - 8) * 0.5, value 19: 0
  std::vector<float> want(32, 0.0f);
  want[0] = 3.5f;
  want[16] = -4.0f;
  want[3] = -4.0f;
  expect_same_bits(dequant_block(GgmlType::Q4_0, b), want);
}

TEST(GgmlBlocks, Q4_1ByHand) {
  std::vector<uint8_t> b(20, 0);
  put_half(b, 0, kHalfHalf);
  put_half(b, 2, kHalfMinusOne);  // m = -1
  b[4 + 1] = 0xF2;                // value 1: 2 * 0.5 - 1, value 17: 15 * 0.5 - 1
  std::vector<float> want(32, -1.0f);
  want[1] = 0.0f;
  want[17] = 6.5f;
  expect_same_bits(dequant_block(GgmlType::Q4_1, b), want);
}

TEST(GgmlBlocks, Q5_0ByHand) {
  std::vector<uint8_t> b(22, 0);
  put_half(b, 0, kHalfOne);
  b[2] = 0x01;      // qh bit 0: value 0 gets 16
  b[2 + 2] = 0x04;  // qh bit 18: value 18 gets 16
  b[6 + 2] = 0x5F;  // value 2: 15 - 16, value 18: (5 | 16) - 16
  std::vector<float> want(32, -16.0f);
  want[0] = 0.0f;
  want[2] = -1.0f;
  want[18] = 5.0f;
  expect_same_bits(dequant_block(GgmlType::Q5_0, b), want);
}

TEST(GgmlBlocks, Q5_1ByHand) {
  std::vector<uint8_t> b(24, 0);
  put_half(b, 0, kHalfTwo);
  put_half(b, 2, kHalfHalf);  // m = 0.5
  b[4 + 3] = 0x80;            // qh bit 31: value 31 gets 16
  b[8 + 15] = 0xA0;           // value 15: 0, value 31: 10 | 16
  std::vector<float> want(32, 0.5f);
  want[31] = 26 * 2.0f + 0.5f;
  expect_same_bits(dequant_block(GgmlType::Q5_1, b), want);
}

TEST(GgmlBlocks, Q8_0ByHand) {
  std::vector<uint8_t> b(34, 0);
  put_half(b, 0, kHalfQuarter);
  b[2 + 0] = 0x80;  // -128
  b[2 + 1] = 0x7F;  // 127
  b[2 + 31] = 0xFF;  // -1
  std::vector<float> want(32, 0.0f);
  want[0] = -32.0f;
  want[1] = 31.75f;
  want[31] = -0.25f;
  expect_same_bits(dequant_block(GgmlType::Q8_0, b), want);
}

TEST(GgmlBlocks, Q2_KByHand) {
  // scales @0 (low nibble scale, high nibble min), qs @16, d @80, dmin @82.
  std::vector<uint8_t> b(84, 0);
  put_half(b, 80, kHalfOne);
  put_half(b, 82, kHalfHalf);
  b[0] = 0x21;   // values 0-15: scale 1, min 2
  b[2] = 0x12;   // values 32-47: scale 2, min 1
  b[6] = 0xF0;   // values 96-111: scale 0, min 15
  b[16] = 0xE4;  // byte 0 of qs: 2-bit codes 0, 1, 2, 3 at shifts 0, 2, 4, 6
  std::vector<float> want(256, 0.0f);
  for (int i = 0; i < 16; ++i) want[i] = -1.0f;        // 1 * 0 - 0.5 * 2
  want[32] = 1.5f;                                    // 2 * 1 - 0.5
  for (int i = 33; i < 48; ++i) want[i] = -0.5f;
  for (int i = 96; i < 112; ++i) want[i] = -7.5f;     // 0 * q - 0.5 * 15 (code 3 at value 96)
  expect_same_bits(dequant_block(GgmlType::Q2_K, b), want);
}

TEST(GgmlBlocks, Q3_KByHand) {
  // hmask @0, qs @32, scales @96 (6-bit, biased by 32), d @108.
  std::vector<uint8_t> b(110, 0);
  for (int i = 0; i < 32; ++i) b[i] = 0xFF;  // high bits set: no -4
  b[16] = 0xFB;                              // bit 2 of byte 16 clear: value 80 gets -4
  for (int i = 8; i < 12; ++i) b[96 + i] = 0xAA;  // every scale's top bits = 2: raw 32, scale 0
  b[96 + 0] = 0x01;                               // scale 0: raw 33 -> 1
  b[96 + 5] = 0x0E;                               // scale 5: low bits 14 ...
  b[96 + 9] = 0xA6;                               // ... top bits 1: raw 30 -> -2
  b[32 + 0] = 0x03;   // value 0: code 3
  b[32 + 16] = 0x30;  // value 80 (second half of the group at shift 4): code 3
  put_half(b, 108, kHalfOne);
  std::vector<float> want(256, 0.0f);
  want[0] = 3.0f;                                         // 1 * 3
  want[80] = 2.0f;                                        // -2 * (3 - 4)
  for (int i = 81; i < 96; ++i) want[i] = -0.0f;          // -2 * 0
  expect_same_bits(dequant_block(GgmlType::Q3_K, b), want);
}

TEST(GgmlBlocks, Q4_KByHand) {
  // d @0, dmin @2, 12 bytes of 6-bit scales and mins @4, qs @16.
  std::vector<uint8_t> b(144, 0);
  put_half(b, 0, kHalfOne);
  put_half(b, 2, kHalfHalf);
  b[4 + 0] = 2;     // pair 0: scale 2
  b[4 + 4] = 4;     //         min 4
  b[4 + 9] = 0x13;  // pair 5: scale low 3, min low 1
  b[4 + 1] = 0x40;  //         scale top bits 1 -> 19
  b[4 + 5] = 0x80;  //         min top bits 2 -> 33
  b[16 + 0] = 0x0A;   // value 0 (low nibble, pair 0): 10
  b[16 + 64] = 0x70;  // value 160 (high nibble of the third chunk, pair 5): 7
  std::vector<float> want(256, 0.0f);
  want[0] = 18.0f;  // 2 * 10 - 0.5 * 4
  for (int i = 1; i < 32; ++i) want[i] = -2.0f;
  want[160] = 116.5f;  // 19 * 7 - 0.5 * 33
  for (int i = 161; i < 192; ++i) want[i] = -16.5f;
  expect_same_bits(dequant_block(GgmlType::Q4_K, b), want);
}

TEST(GgmlBlocks, Q5_KByHand) {
  // d @0, dmin @2, scales @4, qh @16, qs @48.
  std::vector<uint8_t> b(176, 0);
  put_half(b, 0, kHalfOne);
  put_half(b, 2, kHalfHalf);
  b[4 + 0] = 2;  // pair 0: scale 2, min 4
  b[4 + 4] = 4;
  b[4 + 1] = 1;         // pair 1: scale 1, min 0
  b[16 + 0] = 0x01;     // value 0 gets 16
  b[16 + 3] = 0x02;     // value 35 (high nibble of byte 3) gets 16
  b[48 + 0] = 0x05;     // value 0: 5
  std::vector<float> want(256, 0.0f);
  want[0] = 40.0f;  // 2 * (5 + 16) - 2
  for (int i = 1; i < 32; ++i) want[i] = -2.0f;
  want[35] = 16.0f;
  expect_same_bits(dequant_block(GgmlType::Q5_K, b), want);
}

TEST(GgmlBlocks, Q6_KByHand) {
  // ql @0, qh @128, int8 scales @192, d @208; a value is (d * scale) * (6-bit code - 32).
  std::vector<uint8_t> b(210, 0);
  for (int i = 0; i < 64; ++i) b[128 + i] = 0xAA;  // top bits 2 everywhere: code 32, value 0
  for (int i = 0; i < 16; ++i) b[192 + i] = 1;
  b[192 + 0] = static_cast<uint8_t>(-3);  // values 0-15
  b[192 + 6] = 5;                         // values 96-111
  b[192 + 9] = 2;                         // values 144-159
  put_half(b, 208, kHalfHalf);
  b[0] = 0x0F;          // value 0: code 47
  b[32 + 2] = 0x10;     // value 98: code 33
  b[128 + 49] = 0xA8;   // value 145 (second half, l = 17): code 0
  std::vector<float> want(256, 0.0f);
  want[0] = -22.5f;                                 // (0.5 * -3) * 15
  for (int i = 1; i < 16; ++i) want[i] = -0.0f;     // -1.5 * 0
  want[98] = 2.5f;                                  // (0.5 * 5) * 1
  want[145] = -32.0f;                               // (0.5 * 2) * -32
  expect_same_bits(dequant_block(GgmlType::Q6_K, b), want);
}

TEST(GgmlBlocks, DenseTypesConvertExactly) {
  const std::vector<uint8_t> f16 = {0x00, 0x3C, 0x01, 0x80};  // 1.0, -smallest subnormal
  std::vector<float> y(2);
  dequantize_rows(GgmlType::F16, f16.data(), 1, 2, y.data());
  expect_same_bits(y, {1.0f, -std::ldexp(1.0f, -24)});
  const std::vector<uint8_t> bf16 = {0x80, 0x3F, 0x00, 0xC0};  // 1.0, -2.0
  dequantize_rows(GgmlType::BF16, bf16.data(), 2, 1, y.data());
  expect_same_bits(y, {1.0f, -2.0f});
}

// ------------------------------------------------------------------ against gguf-py

TEST(GgmlDequant, MatchesGgufPyBitExactlyForEveryType) {
  const io::GgufFile blocks(test::fixture("gguf/blocks.gguf"));
  const io::SafetensorsFile expected(test::fixture("gguf/blocks.expected.safetensors"));
  std::set<GgmlType> covered;
  for (const std::string& name : blocks.names()) {
    SCOPED_TRACE(name);
    const io::GgmlTensor g = blocks.ggml_tensor(name);
    const Tensor got = quantization::dequantize(g);
    const Tensor want = expected.tensor(name);
    ASSERT_EQ(got.shape(), want.shape());
    std::vector<float> a(got.data<float>(), got.data<float>() + got.numel());
    std::vector<float> b(want.data<float>(), want.data<float>() + want.numel());
    expect_same_bits(a, b);
    covered.insert(g.type);
  }
  EXPECT_EQ(expected.size(), blocks.size());
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                     GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
    EXPECT_TRUE(covered.count(t)) << ggml_type_name(t) << " not covered by the fixture";
}

TEST(GgmlDequant, BF16AndF16OutputsRoundTheF32Values) {
  const io::GgufFile blocks(test::fixture("gguf/blocks.gguf"));
  const io::GgmlTensor g = blocks.ggml_tensor("Q6_K.random");
  const Tensor f32 = quantization::dequantize(g);
  const Tensor bf = quantization::dequantize(g, DType::BF16);
  EXPECT_EQ(bf.dtype(), DType::BF16);
  const Tensor back = bf.to(DType::F32);
  const Tensor ref = f32.to(DType::BF16).to(DType::F32);
  EXPECT_EQ(std::memcmp(back.raw_data(), ref.raw_data(), ref.nbytes()), 0);
  expect_error_containing([&] { quantization::dequantize(g, DType::I32); },
                          {"f32, bf16 or f16", "i32"});
}

// ------------------------------------------------------------------ the row API

std::vector<uint8_t> random_q6_k(int64_t rows, int64_t cols, uint64_t seed) {
  const int64_t n_blocks = rows * cols / 256;
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * 210));
  std::mt19937_64 rng(seed);
  for (auto& x : bytes) x = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < n_blocks; ++i) put_half(bytes, static_cast<size_t>(i * 210 + 208), 0x2E66);
  return bytes;
}

TEST(GgmlDequant, RowsAreIndependentOfTheThreadSplitAndOfTheRowRange) {
  const int64_t rows = 96, cols = 2048;
  const std::vector<uint8_t> bytes = random_q6_k(rows, cols, 11);
  std::vector<float> one(static_cast<size_t>(rows * cols)), many(one.size());
  const int threads = num_threads();
  set_num_threads(1);
  dequantize_rows(GgmlType::Q6_K, bytes.data(), rows, cols, one.data());
  set_num_threads(4);
  dequantize_rows(GgmlType::Q6_K, bytes.data(), rows, cols, many.data());
  set_num_threads(threads);
  expect_same_bits(many, one);

  // Rows [40, 45) alone, from their first byte: the same values.
  const int64_t row_bytes = quantization::ggml_row_bytes(GgmlType::Q6_K, cols);
  EXPECT_EQ(row_bytes, cols / 256 * 210);
  std::vector<float> part(static_cast<size_t>(5 * cols));
  dequantize_rows(GgmlType::Q6_K, bytes.data() + 40 * row_bytes, 5, cols, part.data());
  expect_same_bits(part, std::vector<float>(one.begin() + 40 * cols, one.begin() + 45 * cols));
}

TEST(GgmlDequant, UnsupportedTypesAndBadRowsAreErrorsNamingThem) {
  io::GgmlTensor t;
  t.name = "blk.0.attn_q.weight";
  t.type = GgmlType::IQ2_XXS;
  t.shape = Shape{1, 256};
  t.row_elems = 256;
  t.bytes = Tensor::zeros(Shape{66}, DType::U8);
  expect_error_containing([&] { quantization::dequantize(t); },
                          {"tensor 'blk.0.attn_q.weight'", "IQ2_XXS", "cannot dequantise",
                           "supported: F32, F16, BF16, Q4_0", "Q6_K"});
  EXPECT_FALSE(quantization::ggml_can_dequantize(GgmlType::Q8_1));
  EXPECT_TRUE(quantization::ggml_can_dequantize(GgmlType::Q3_K));
  std::vector<float> out(48);
  std::vector<uint8_t> in(64);
  expect_error_containing([&] { dequantize_rows(GgmlType::Q8_0, in.data(), 1, 48, out.data()); },
                          {"48 values", "Q8_0 blocks", "32 values each"});
  t.type = GgmlType::Q8_0;
  t.shape = Shape{2, 32};
  t.row_elems = 32;
  t.bytes = Tensor::zeros(Shape{34}, DType::U8);  // one block for two rows
  expect_error_containing([&] { quantization::dequantize(t); },
                          {"'blk.0.attn_q.weight' holds 34 bytes, not 2 rows of 32 Q8_0 values"});
}

TEST(GgmlTypes, NamesSizesAndDenseTypes) {
  EXPECT_STREQ(ggml_type_name(GgmlType::Q4_K), "Q4_K");
  EXPECT_EQ(ggml_type_from_name("q5_k"), GgmlType::Q5_K);
  EXPECT_FALSE(ggml_type_from_name("Q4_2").has_value());
  EXPECT_EQ(ggml_type_traits(4), nullptr);  // retired ids are no types
  EXPECT_EQ(ggml_type_traits(31), nullptr);
  EXPECT_EQ(ggml_traits(GgmlType::Q6_K).block_bytes, 210);
  EXPECT_EQ(ggml_nbytes(GgmlType::Q4_K, 512), 288u);
  EXPECT_FALSE(ggml_nbytes(GgmlType::Q4_K, 100).has_value());
  EXPECT_EQ(ggml_dense_dtype(GgmlType::BF16), DType::BF16);
  EXPECT_FALSE(ggml_dense_dtype(GgmlType::I16).has_value());
  EXPECT_FALSE(ggml_dense_dtype(GgmlType::Q8_0).has_value());
  EXPECT_EQ(ggml_type_of(DType::F16), GgmlType::F16);
  EXPECT_TRUE(ggml_is_quantized(GgmlType::Q2_K));
  EXPECT_FALSE(ggml_is_quantized(GgmlType::F32));
}

}  // namespace
}  // namespace ltx
