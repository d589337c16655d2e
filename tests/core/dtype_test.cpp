// Conversions checked against bit patterns produced by PyTorch 2.x (`torch.tensor(x).to(dt)
// .view(torch.uint8/int16)`), i.e. c10's rounding rules.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/dtype.h"
#include "core/tensor.h"

namespace ltx::dtype_test {
namespace {

using namespace dtype_bits;
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F8E4M3FN), 1u);
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  for (int i = 0; i < kNumDTypes; ++i) {
    DType d;
    ASSERT_TRUE(dtype_from_name(dtype_name(static_cast<DType>(i)), &d));
    EXPECT_EQ(static_cast<int>(d), i);
  }
  DType d;
  EXPECT_FALSE(dtype_from_name("f12", &d));
}

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(-2.5f), 0xC020);
  // 1 + 2^-8 is exactly half way between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F808000u)), 0x3F80);
  // 1.0078125 + half ulp: ties to even goes up to 0x3F82.
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F818000u)), 0x3F82);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x3F808001u)), 0x3F81);  // just above half: up
  EXPECT_EQ(f32_to_bf16(3.14159265f), 0x4049);
  EXPECT_EQ(f32_to_bf16(kInf), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-kInf), 0xFF80);
  EXPECT_EQ(f32_to_bf16(kNaN), 0x7FC0);
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to inf
  EXPECT_EQ(f32_to_bf16(f32_from_bits(0x00000001u)), 0x0000);  // smallest denormal -> 0
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

TEST(DType, F16RoundsToNearestEvenWithOverflowAndSubnormals) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);   // max half
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);   // below the rounding boundary
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);   // ties to even -> inf
  EXPECT_EQ(f32_to_f16(1e6f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xFC00);
  EXPECT_EQ(f32_to_f16(kNaN), 0x7E00);
  EXPECT_EQ(f32_to_f16(5.960464477539063e-08f), 0x0001);  // 2^-24, smallest subnormal
  EXPECT_EQ(f32_to_f16(2.9802322387695312e-08f), 0x0000);  // 2^-25: tie -> even (0)
  EXPECT_EQ(f32_to_f16(8.940696716308594e-08f), 0x0002);   // 1.5 * 2^-24: tie -> even (2)
  EXPECT_EQ(f32_to_f16(6.103515625e-05f), 0x0400);  // smallest normal
  EXPECT_EQ(f32_to_f16(0.1f), 0x2E66);
  EXPECT_EQ(f32_to_f16(1.0009765625f), 0x3C01);
  EXPECT_EQ(f32_to_f16(1.00048828125f), 0x3C00);  // half ulp above 1: tie -> even
  EXPECT_EQ(f32_to_f16(1.00146484375f), 0x3C02);  // 1 + 1.5 ulp: tie -> even (up)
  EXPECT_EQ(f16_to_f32(0x2E66), 0.0999755859375f);
  EXPECT_EQ(f16_to_f32(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0xFC00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
}

TEST(DType, F8E4M3FnRoundingNaNAndNoSaturation) {
  EXPECT_EQ(f32_to_f8e4m3fn(1.0f), 0x38);
  EXPECT_EQ(f32_to_f8e4m3fn(-1.0f), 0xB8);
  EXPECT_EQ(f32_to_f8e4m3fn(448.0f), 0x7E);   // max finite
  EXPECT_EQ(f32_to_f8e4m3fn(464.0f), 0x7E);   // tie between 448 and (NaN slot 480): even -> 448
  EXPECT_EQ(f32_to_f8e4m3fn(463.0f), 0x7E);
  EXPECT_EQ(f32_to_f8e4m3fn(470.0f), 0x7F);   // rounds onto the NaN code: torch's CPU .to() does not saturate
  EXPECT_EQ(f32_to_f8e4m3fn(480.0f), 0x7F);
  EXPECT_EQ(f32_to_f8e4m3fn(1000.0f), 0x7F);
  EXPECT_EQ(f32_to_f8e4m3fn(-1000.0f), 0xFF);
  EXPECT_EQ(f32_to_f8e4m3fn(kInf), 0x7F);
  EXPECT_EQ(f32_to_f8e4m3fn(kNaN), 0x7F);
  EXPECT_EQ(f32_to_f8e4m3fn(0.0019531250f), 0x01);  // 2^-9, smallest subnormal
  EXPECT_EQ(f32_to_f8e4m3fn(0.0009765625f), 0x00);  // 2^-10: tie -> even (0)
  EXPECT_EQ(f32_to_f8e4m3fn(0.0029296875f), 0x02);  // 1.5 * 2^-9: tie -> even (2)
  EXPECT_EQ(f32_to_f8e4m3fn(0.015625f), 0x08);      // 2^-6, smallest normal
  EXPECT_EQ(f32_to_f8e4m3fn(1.0625f), 0x38);        // 1 + half ulp: tie -> even (1.0)
  EXPECT_EQ(f32_to_f8e4m3fn(1.1875f), 0x3A);        // 1.125 + half ulp: tie -> even (1.25)
  EXPECT_EQ(f32_to_f8e4m3fn(0.3f), 0x2A);
  EXPECT_EQ(f8e4m3fn_to_f32(0x7E), 448.0f);
  EXPECT_EQ(f8e4m3fn_to_f32(0x01), 0.001953125f);
  EXPECT_EQ(f8e4m3fn_to_f32(0x2A), 0.3125f);
  EXPECT_EQ(f8e4m3fn_to_f32(0x29), 0.28125f);
  EXPECT_TRUE(std::isnan(f8e4m3fn_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(f8e4m3fn_to_f32(0xFF)));
  EXPECT_EQ(f32_bits(f8e4m3fn_to_f32(0x7F)), 0x7FF00000u);
}

TEST(DType, F8E5M2RoundingAndOverflow) {
  EXPECT_EQ(f32_to_f8e5m2(1.0f), 0x3C);
  EXPECT_EQ(f32_to_f8e5m2(57344.0f), 0x7B);  // max finite
  EXPECT_EQ(f32_to_f8e5m2(61439.0f), 0x7B);
  EXPECT_EQ(f32_to_f8e5m2(61440.0f), 0x7C);  // tie -> even -> inf
  EXPECT_EQ(f32_to_f8e5m2(1e9f), 0x7C);
  EXPECT_EQ(f32_to_f8e5m2(-kInf), 0xFC);
  EXPECT_EQ(f32_to_f8e5m2(kNaN), 0x7F);
  EXPECT_EQ(f32_to_f8e5m2(1.125f), 0x3C);    // tie -> even
  EXPECT_EQ(f32_to_f8e5m2(1.375f), 0x3E);    // tie -> even (up)
  EXPECT_EQ(f32_to_f8e5m2(1.52587890625e-05f), 0x01);  // 2^-16 smallest subnormal
  EXPECT_EQ(f8e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_TRUE(std::isinf(f8e5m2_to_f32(0x7C)));
}

TEST(DType, F64GoesThroughF32LikeC10) {
  // 1 + 2^-8 + 2^-30 in double: direct rounding to bf16 would go up, but c10 first rounds to
  // float (which drops the 2^-30), leaving an exact tie that rounds to even (1.0).
  const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  uint16_t out;
  convert_dense(&x, DType::F64, &out, DType::BF16, 1);
  EXPECT_EQ(out, 0x3F80);
}

TEST(DType, IntegerAndBoolConversions) {
  const float src[] = {-2.7f, 2.7f, 0.0f, 300.0f};
  int32_t i32[4];
  convert_dense(src, DType::F32, i32, DType::I32, 4);
  EXPECT_EQ(i32[0], -2);
  EXPECT_EQ(i32[1], 2);
  EXPECT_EQ(i32[3], 300);
  uint8_t b[4];
  convert_dense(src, DType::F32, b, DType::Bool, 4);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[2], 0);
  const int64_t big = (int64_t{1} << 40) + 1;
  double d;
  convert_dense(&big, DType::I64, &d, DType::F64, 1);
  EXPECT_EQ(d, static_cast<double>(big));
}

TEST(DType, TensorToRoundTripsEveryFloatType) {
  Tensor t = Tensor::from_vector<float>({0.5f, -1.25f, 3.0f, 0.0f}, {4});
  for (DType dt : {DType::F16, DType::BF16, DType::F8E4M3FN, DType::F8E5M2, DType::F64}) {
    Tensor back = t.to(dt).to(DType::F32);
    EXPECT_EQ(back.to_float_vector(), t.to_float_vector()) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace ltx::dtype_test
