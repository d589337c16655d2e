// Linear layers on GGML blocks on the CPU (ops/ggml_linear.h): every type against "dequantise
// the whole weight, then the dense GEMM", row groups, odd shapes, a bias, strided inputs, GELU
// and the argument checks.
#include "ops/ggml_linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/ggml_linear.h"
#include "io/io_test_util.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "quantization/ggml_dequant.h"
#include "support/ggml_weights.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::random_ggml_weight;
using test::random_tensor;

Tensor reference(const Tensor& x, const ops::GgmlWeight& w, const Tensor& bias) {
  return ops::linear(x, ops::dequantize_ggml(w, DType::F32), bias);
}

TEST(GgmlLinearCpu, DequantisesEveryTypeBitForBitAsTheRowDequantiser) {
  for (GgmlType type : test::ggml_compute_types()) {
    SCOPED_TRACE(ggml_type_name(type));
    const int64_t out = 7, in = test::ggml_row_len(type, 3);
    const ops::GgmlWeight w = random_ggml_weight(type, out, in, 11);
    const Tensor got = ops::dequantize_ggml(w, DType::F32);
    ASSERT_EQ(got.shape(), Shape({out, in}));
    Tensor want = Tensor::empty({out, in});
    quantization::dequantize_rows(type, w.blocks.raw_data(), out, in, want.data<float>());
    EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0);
    EXPECT_EQ(ops::dequantize_ggml(w, DType::BF16).to(DType::F32).to_float_vector(),
              want.to(DType::BF16).to(DType::F32).to_float_vector());
  }
}

TEST(GgmlLinearCpu, MatchesTheDenseGemmOfTheDequantisedWeightForEveryType) {
  for (GgmlType type : test::ggml_compute_types()) {
    SCOPED_TRACE(ggml_type_name(type));
    const int64_t out = 37, in = test::ggml_row_len(type, ops::ggml::block_elems(type) == 1 ? 45 : 2);
    const ops::GgmlWeight w = random_ggml_weight(type, out, in, 21);
    const Tensor x = random_tensor({2, 5, in}, 22);
    const Tensor bias = random_tensor({out}, 23);
    const Tensor y = ops::linear_ggml(x, w, bias);
    EXPECT_EQ(y.shape(), Shape({2, 5, out}));
    EXPECT_LT(test::max_rel_err(y, reference(x, w, bias)), 1e-5);
    EXPECT_LT(test::max_rel_err(ops::linear_ggml(x, w), reference(x, w, Tensor())), 1e-5);
  }
}

TEST(GgmlLinearCpu, WeightsLargerThanOneRowGroupGiveTheSameProduct) {
  // Just over one group of rows each: the last group is short.
  for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q4_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    const int64_t in = ops::ggml::block_elems(type);
    const int64_t out = cpu::kGgmlGroupValues / in + 5;
    const ops::GgmlWeight w = random_ggml_weight(type, out, in, 31);
    const Tensor x = random_tensor({3, in}, 32);
    const Tensor bias = random_tensor({out}, 33);
    EXPECT_LT(test::max_rel_err(ops::linear_ggml(x, w, bias), reference(x, w, bias)), 1e-5);
  }
}

TEST(GgmlLinearCpu, TakesStridedInputs) {
  const GgmlType type = GgmlType::Q5_1;
  const int64_t in = 64, out = 9;
  const ops::GgmlWeight w = random_ggml_weight(type, out, in, 41);
  const Tensor x = random_tensor({in, 6}, 42).transpose(0, 1);  // [6, in], column stride 6
  ASSERT_FALSE(x.is_contiguous());
  const Tensor sliced = random_tensor({4, 2 * in}, 43).narrow(1, 3, in);
  EXPECT_LT(test::max_rel_err(ops::linear_ggml(x, w), reference(x.contiguous(), w, Tensor())), 1e-5);
  EXPECT_LT(test::max_rel_err(ops::linear_ggml(sliced, w), reference(sliced.contiguous(), w, Tensor())),
            1e-5);
}

TEST(GgmlLinearCpu, GeluVariantIsTheGeluOfTheLinear) {
  const ops::GgmlWeight w = random_ggml_weight(GgmlType::Q6_K, 11, 256, 51);
  const Tensor x = random_tensor({3, 256}, 52);
  const Tensor bias = random_tensor({11}, 53);
  const Tensor want = ops::gelu_tanh(ops::linear_ggml(x, w, bias));
  EXPECT_EQ(ops::linear_ggml_gelu_tanh(x, w, bias).to_float_vector(), want.to_float_vector());
}

TEST(GgmlLinearCpu, RejectsTypesItCannotComputeWithAndMisshapedArguments) {
  ops::GgmlWeight w = random_ggml_weight(GgmlType::Q8_0, 4, 64, 61);
  const Tensor x = random_tensor({2, 64}, 62);
  ops::GgmlWeight iq = w;
  iq.type = GgmlType::IQ4_NL;
  test::expect_error_containing([&] { (void)ops::linear_ggml(x, iq); },
                                {"IQ4_NL", "Q4_K", "cannot compute"});
  ops::GgmlWeight odd = w;
  odd.in_features = 48;
  test::expect_error_containing([&] { (void)ops::linear_ggml(x.narrow(1, 0, 48), odd); },
                                {"48 input features", "Q8_0 blocks"});
  ops::GgmlWeight short_rows = w;
  short_rows.blocks = w.blocks.narrow(1, 0, 34).contiguous();
  test::expect_error_containing([&] { (void)ops::linear_ggml(x, short_rows); },
                                {"u8 [out, 68]"});
  test::expect_error_containing([&] { (void)ops::linear_ggml(random_tensor({2, 32}, 63), w); },
                                {"32 input features", "expects 64"});
  test::expect_error_containing([&] { (void)ops::linear_ggml(x, w, random_tensor({5}, 64)); },
                                {"bias", "[4]"});
  test::expect_error_containing([&] { (void)ops::linear_ggml(x.to(DType::BF16), w); },
                                {"linear_ggml", "x"});
}

}  // namespace
}  // namespace ltx
