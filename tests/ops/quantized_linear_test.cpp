#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype_bits.h"
#include "io/safetensors.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/quantized_linear.h"
#include "ops/reduce.h"
#include "support/test_support.h"

namespace ltx::quantized_linear_test {
namespace {

using test::error_of;
using test::non_contiguous_copy;
using test::random_tensor;

Tensor scalar_f32(float v) { return Tensor::full({}, static_cast<double>(v), DType::F32); }

std::vector<uint8_t> bits_of(const Tensor& q) {
  const Tensor c = q.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return {p, p + c.numel()};
}

float round_bf16(float v) { return dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(v)); }

TEST(QuantizeFp8, ClampsToPlusMinus448AndKeepsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // input_scale 0.5 doubles every value before the cast.
  const Tensor x = Tensor::from_vector<float>(
      {0.f, 0.5f, -0.5f, 224.f, 250.f, -1e6f, inf, -inf, nan, 0.53125f, 0.59375f}, {11});
  const std::vector<uint8_t> q = bits_of(ops::quantize_fp8(x, scalar_f32(0.5f)));
  const std::vector<uint8_t> want = {
      0x00,  // 0
      0x38,  // 1.0
      0xB8,  // -1.0
      0x7E,  // 448, the largest finite e4m3
      0x7E,  // 500 clamps to 448 (an unclamped cast would be NaN)
      0xFE,  // -2e6 clamps to -448
      0x7E,  // inf clamps to 448
      0xFE,  // -inf clamps to -448
      0x7F,  // NaN stays NaN
      0x38,  // 1.0625: halfway between 1.0 and 1.125, ties to the even mantissa (1.0)
      0x3A,  // 1.1875: halfway between 1.125 and 1.25, ties to even (1.25)
  };
  EXPECT_EQ(q, want);
}

TEST(QuantizeFp8, Bf16InputRoundsTheProductToBf16BeforeTheCast) {
  // 1.0078125 * 1.0546875 = 1.0629..., which rounds to 1.125 in e4m3 directly, but a bf16
  // product is 1.0625, a tie that rounds to 1.0: torch rounds the bf16 x * (1 / scale) to bf16
  // first. The multiplier itself is rounded to bf16 too (torch's CUDA kernel casts the f32 0-d
  // scale to the tensor's dtype), which 1.0546875 survives exactly.
  const Tensor scale = scalar_f32(1.0f / 1.0546875f);
  const Tensor x32 = Tensor::from_vector<float>({1.0078125f}, {1});
  EXPECT_EQ(bits_of(ops::quantize_fp8(x32.to(DType::BF16), scale)), std::vector<uint8_t>{0x38});
  EXPECT_EQ(bits_of(ops::quantize_fp8(x32, scale)), std::vector<uint8_t>{0x39});
}

TEST(QuantizeFp8, AnyStridesGiveTheContiguousResult) {
  const Tensor x = random_tensor({3, 5, 37}, 11, -40.f, 40.f).to(DType::BF16);
  const Tensor s = scalar_f32(0.07f);
  const Tensor q = ops::quantize_fp8(non_contiguous_copy(x), s);
  EXPECT_TRUE(q.is_contiguous());
  EXPECT_EQ(q.dtype(), DType::F8E4M3FN);
  EXPECT_EQ(q.shape(), x.shape());
  EXPECT_EQ(bits_of(q), bits_of(ops::quantize_fp8(x, s)));
}

// The op spelled out: quantise, upcast, an f32 GEMM, then the reference's roundings.
Tensor composed(const Tensor& x, const Tensor& w, float ws, float is, const Tensor& bias) {
  const int64_t k = w.size(1), n = w.size(0);
  const Tensor q = ops::quantize_fp8(x, scalar_f32(is)).to(DType::F32);
  const Tensor acc = ops::linear(q.reshape({q.numel() / k, k}), w.to(DType::F32));
  std::vector<float> y = acc.to_float_vector();
  const std::vector<float> b = bias.defined() ? bias.to_float_vector() : std::vector<float>();
  const bool bf16 = x.dtype() == DType::BF16;
  for (size_t i = 0; i < y.size(); ++i) {
    float v = y[i] * (is * ws);
    if (bf16) v = round_bf16(v);
    if (!b.empty()) {
      const float bi = bf16 ? round_bf16(b[i % static_cast<size_t>(n)]) : b[i % static_cast<size_t>(n)];
      v = bf16 ? round_bf16(v + bi) : v + bi;
    }
    y[i] = v;
  }
  Shape s = x.shape();
  s[s.size() - 1] = n;
  return Tensor::from_vector(y, s).to(x.dtype());
}

TEST(LinearFp8Scaled, EqualsDequantizeThenF32GemmBitForBit) {
  for (const DType dt : {DType::BF16, DType::F32}) {
    const Tensor x = non_contiguous_copy(random_tensor({2, 5, 48}, 1, -3.f, 3.f).to(dt));
    const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(random_tensor({32, 48}, 2));
    const float ws = static_cast<float>(w.weight_scale.item()), is = 3.f / 448.f;
    for (const bool with_bias : {false, true}) {
      const Tensor bias = with_bias ? random_tensor({32}, 3) : Tensor();
      const Tensor y = ops::linear_fp8_scaled(x, w.weight, w.weight_scale, scalar_f32(is), bias);
      EXPECT_EQ(y.dtype(), dt);
      EXPECT_EQ(y.shape(), (Shape{2, 5, 32}));
      EXPECT_EQ(y.to_float_vector(), composed(x, w.weight, ws, is, bias).to_float_vector())
          << dtype_name(dt) << (with_bias ? " with bias" : "");
    }
  }
}

TEST(LinearFp8Scaled, StaysNearTheUnquantizedLinear) {
  // Inputs within the calibrated range: e4m3 keeps 3 mantissa bits, so each operand is within
  // 2^-4 relative and the output's relative L2 error stays a few percent.
  const Tensor x = random_tensor({7, 64}, 4, -2.f, 2.f);
  const Tensor w32 = random_tensor({48, 64}, 5, -0.5f, 0.5f);
  const Tensor bias = random_tensor({48}, 6);
  const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(w32);
  const Tensor y = ops::linear_fp8_scaled(x, w.weight, w.weight_scale, scalar_f32(2.f / 448.f), bias);
  const Tensor ref = ops::linear(x, w32, bias);
  const std::vector<double> a = y.to_double_vector(), b = ref.to_double_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  const double rel_l2 = std::sqrt(num / den);
  EXPECT_LT(rel_l2, 0.05);
  EXPECT_GT(rel_l2, 0.0);  // it did quantise
}

TEST(LinearFp8Scaled, EmptyInputFeaturesGiveTheBias) {
  const Tensor w = Tensor::zeros({16, 0}, DType::F8E4M3FN);
  const Tensor bias = random_tensor({16}, 7);
  const Tensor y = ops::linear_fp8_scaled(Tensor::zeros({3, 0}), w, scalar_f32(1.f), scalar_f32(1.f), bias);
  EXPECT_EQ(y.shape(), (Shape{3, 16}));
  EXPECT_EQ(y.select(0, 2).to_float_vector(), bias.to_float_vector());
}

TEST(LinearFp8Scaled, RejectsBadArgumentsNamingThem) {
  const Tensor x = random_tensor({4, 32}, 8).to(DType::BF16);
  const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(random_tensor({16, 32}, 9));
  const Tensor one = scalar_f32(1.f);
  auto run = [&](const Tensor& xx, const Tensor& ww, const Tensor& ws, const Tensor& is,
                 const Tensor& b) {
    return error_of([&] { (void)ops::linear_fp8_scaled(xx, ww, ws, is, b); });
  };
  EXPECT_NE(run(x, w.weight, w.weight_scale, scalar_f32(0.f), {}).find("input_scale"), std::string::npos);
  EXPECT_NE(run(x, w.weight, w.weight_scale, scalar_f32(0.f), {}).find("> 0"), std::string::npos);
  EXPECT_NE(run(x, w.weight, scalar_f32(-1.f), one, {}).find("weight_scale"), std::string::npos);
  EXPECT_NE(run(x, w.weight, w.weight_scale, scalar_f32(std::nanf("")), {}).find("finite"),
            std::string::npos);
  EXPECT_NE(run(x, w.weight.to(DType::BF16), one, one, {}).find("float8_e4m3fn"), std::string::npos);
  EXPECT_NE(run(x.narrow(1, 0, 16), w.weight, one, one, {}).find("input features"), std::string::npos);
  EXPECT_NE(run(x, w.weight, Tensor::full({2}, 1.0), one, {}).find("one element"), std::string::npos);
  EXPECT_NE(run(x, w.weight, one.to(DType::BF16), one, {}).find("f32"), std::string::npos);
  EXPECT_NE(run(x.to(DType::I32), w.weight, one, one, {}).find("bf16 or f32"), std::string::npos);
  EXPECT_NE(run(x, w.weight, one, one, Tensor::zeros({15})).find("bias"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)ops::quantize_fp8(x, scalar_f32(-2.f)); }).find("input_scale"),
            std::string::npos);
}

TEST(QuantizeFp8PerTensor, MapsTheLargestMagnitudeTo448) {
  // amax 4: scale = (1 / 4) * 448 = 112, so the values become 112, -224, 56, 448 (all exact).
  const Tensor w = Tensor::from_vector<float>({1.f, -2.f, 0.5f, 4.f}, {2, 2}).to(DType::BF16);
  const ops::Fp8PerTensor q = ops::quantize_fp8_per_tensor(w);
  EXPECT_EQ(q.weight.dtype(), DType::F8E4M3FN);
  EXPECT_EQ(q.weight.shape(), w.shape());
  EXPECT_EQ(bits_of(q.weight), (std::vector<uint8_t>{0x6E, 0xF6, 0x66, 0x7E}));
  EXPECT_EQ(q.weight_scale.dim(), 0);
  EXPECT_EQ(q.weight_scale.dtype(), DType::F32);
  EXPECT_EQ(static_cast<float>(q.weight_scale.item()), 1.0f / 112.0f);
}

TEST(QuantizeFp8PerTensor, RoundTripsWithinE4m3Precision) {
  const Tensor w = random_tensor({33, 70}, 12, -0.3f, 0.3f);
  const ops::Fp8PerTensor q = ops::quantize_fp8_per_tensor(w);
  const double ws = q.weight_scale.item();
  const std::vector<double> deq = q.weight.to_double_vector(), ref = w.to_double_vector();
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    // Half a step of e4m3's grid: 2^-4 relative for normals, 2^-10 (times the scale) below.
    const double bound = std::abs(ref[i]) / 16.0 + ws * std::ldexp(1.0, -10);
    worst = std::max(worst, std::abs(deq[i] * ws - ref[i]) / bound);
  }
  EXPECT_LE(worst, 1.0);
}

TEST(QuantizeFp8PerTensor, RejectsZeroAndNonFiniteWeights) {
  EXPECT_NE(error_of([] { (void)ops::quantize_fp8_per_tensor(Tensor::zeros({4, 4})); })
                .find("all zeros"),
            std::string::npos);
  const Tensor nan_w = Tensor::from_vector<float>({1.f, std::nanf("")}, {2});
  EXPECT_NE(error_of([&] { (void)ops::quantize_fp8_per_tensor(nan_w); }).find("NaN"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)ops::quantize_fp8_per_tensor(Tensor::zeros({2}, DType::I32)); })
                .find("weight"),
            std::string::npos);
}

TEST(FuseDeltaFp8PerTensor, DequantizesAddsAndRequantizesInF32) {
  const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(random_tensor({24, 40}, 41));
  const Tensor delta = random_tensor({24, 40}, 42, -0.2f, 0.2f).to(DType::BF16);
  const ops::Fp8PerTensor got = ops::fuse_delta_fp8_per_tensor(w.weight, w.weight_scale, delta);
  // The rule spelled out element by element.
  const std::vector<float> q = w.weight.to_float_vector(), d = delta.to_float_vector();
  const float ws = static_cast<float>(w.weight_scale.item());
  std::vector<float> sum(q.size());
  for (size_t i = 0; i < q.size(); ++i) sum[i] = q[i] * ws + d[i];
  const ops::Fp8PerTensor want = ops::quantize_fp8_per_tensor(Tensor::from_vector(sum, {24, 40}));
  EXPECT_EQ(bits_of(got.weight), bits_of(want.weight));
  EXPECT_EQ(got.weight_scale.item(), want.weight_scale.item());
  EXPECT_NE(got.weight_scale.item(), w.weight_scale.item());  // a fresh scale
  EXPECT_NE(error_of([&] { (void)ops::fuse_delta_fp8_per_tensor(w.weight, w.weight_scale, delta.narrow(0, 0, 3)); })
                .find("delta"),
            std::string::npos);
}

TEST(QuantizeFp8PerToken, ScalesEachRowByItsFiniteAmax) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const Tensor x = Tensor::from_vector<float>(
      {1.f, -2.f, 0.5f, 4.f, 0.f, 0.f, 0.f, 0.f, nan, inf, 1.f, -1.f}, {3, 4});
  const ops::Fp8PerToken q = ops::quantize_fp8_per_token(x);
  // Row 0: amax 4, m = 112; row 1: nothing to scale (1, zeros); row 2: amax 1 (inf and NaN are
  // not finite), m = 448: NaN stays NaN, inf clamps to 448.
  EXPECT_EQ(bits_of(q.q), (std::vector<uint8_t>{0x6E, 0xF6, 0x66, 0x7E, 0, 0, 0, 0, 0x7F, 0x7E,
                                                0x7E, 0xFE}));
  EXPECT_EQ(q.row_scale.shape(), (Shape{3}));
  EXPECT_EQ(q.row_scale.to_float_vector(), (std::vector<float>{4.f / 448.f, 1.f, 1.f / 448.f}));
}

TEST(LinearFp8PerToken, EqualsItsCompositionBitForBit) {
  for (const DType dt : {DType::BF16, DType::F32}) {
    const Tensor x = non_contiguous_copy(random_tensor({2, 5, 48}, 21, -3.f, 3.f).to(dt));
    const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(random_tensor({32, 48}, 22));
    const Tensor bias = random_tensor({32}, 23).to(dt);
    const Tensor y = ops::linear_fp8_per_token(x, w.weight, w.weight_scale, bias);
    const ops::Fp8PerToken q = ops::quantize_fp8_per_token(x);
    const std::vector<float> acc =
        ops::linear(q.q.to(DType::F32).reshape({10, 48}), w.weight.to(DType::F32)).to_float_vector();
    const std::vector<float> s = q.row_scale.to_float_vector(), b = bias.to_float_vector();
    const float ws = static_cast<float>(w.weight_scale.item());
    std::vector<float> want(acc.size());
    for (size_t i = 0; i < acc.size(); ++i) {
      float v = acc[i] * ws;
      if (dt == DType::BF16) v = round_bf16(v);
      v = v * s[i / 32] + b[i % 32];
      want[i] = dt == DType::BF16 ? round_bf16(v) : v;
    }
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.shape(), (Shape{2, 5, 32}));
    EXPECT_EQ(y.to_float_vector(), want) << dtype_name(dt);
  }
}

double rel_l2_of(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to_double_vector(), b = want.to_double_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

TEST(LinearFp8PerToken, BeatsTheStaticScaleOnTokensOfDifferentMagnitudes) {
  // The quality gate of the on-the-fly scales: tokens whose magnitudes span 1e-5 .. 10, more
  // than e4m3's range of normals and subnormals (2^-9 .. 448). One static scale, calibrated on
  // the largest, leaves the small tokens to the subnormals or zero; per-token scales keep 3
  // mantissa bits everywhere. Compared per token (relative L2 of each row, averaged) against the
  // unquantized f32 linear with the same e4m3 weight.
  const int64_t rows = 24, k = 64, n = 48;
  std::vector<float> xv = random_tensor({rows, k}, 31).to_float_vector();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < k; ++j)
      xv[static_cast<size_t>(r * k + j)] *= std::pow(10.f, -5.f + 6.f * static_cast<float>(r) / (rows - 1));
  const Tensor x = Tensor::from_vector(xv, {rows, k});
  const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(random_tensor({n, k}, 32));
  const Tensor exact = ops::linear(x, ops::mul(w.weight.to(DType::F32), w.weight_scale.item()));
  const float amax = static_cast<float>(ops::amax(ops::abs(x)).item());
  const Tensor y_static =
      ops::linear_fp8_scaled(x, w.weight, w.weight_scale, scalar_f32(amax / 448.f));
  const Tensor y_token = ops::linear_fp8_per_token(x, w.weight, w.weight_scale);
  double err_static = 0, err_token = 0;
  for (int64_t r = 0; r < rows; ++r) {
    err_static += rel_l2_of(y_static.select(0, r), exact.select(0, r)) / rows;
    err_token += rel_l2_of(y_token.select(0, r), exact.select(0, r)) / rows;
  }
  EXPECT_LT(err_token, 0.04);
  EXPECT_LT(err_token * 4, err_static) << "per-token " << err_token << ", static " << err_static;
}

TEST(LinearFp8PerToken, RejectsBadArgumentsNamingThem) {
  const Tensor x = random_tensor({4, 32}, 33).to(DType::BF16);
  const ops::Fp8PerTensor w = ops::quantize_fp8_per_tensor(random_tensor({16, 32}, 34));
  EXPECT_NE(error_of([&] { (void)ops::linear_fp8_per_token(x, w.weight, scalar_f32(0.f)); })
                .find("weight_scale"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)ops::linear_fp8_per_token(x, w.weight.to(DType::BF16), w.weight_scale); })
                .find("float8_e4m3fn"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)ops::quantize_fp8_per_token(x.to(DType::I32)); }).find("bf16 or f32"),
            std::string::npos);
}

// The reference's own FP8Linear calls, recorded on a GPU by tools/parity/gen_fp8_reference.py:
// per <dtype>.<layer>, the module's input x and output y in a forward of the tiny LTX-2.3
// transformer, x8 = 8 x (past the calibrated range) and y8, and q / q8, the activation
// quantisation alone.
constexpr const char* kReferenceLinears = "ltx23.fp8_scaled.linear.safetensors";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(Fp8ScaledReference, ActivationQuantizationMatchesTorchBitForBit) {
  const std::string path = test::fixture(kReferenceLinears);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (tools/parity/gen_fp8_reference.py)";
  const auto f = io::SafetensorsFile::open(path);
  int checked = 0;
  for (const std::string& n : f->names()) {
    const bool q8 = ends_with(n, ".q8");
    if (!q8 && !ends_with(n, ".q")) continue;
    const std::string tag = n.substr(0, n.rfind('.'));
    const Tensor x = f->tensor(tag + (q8 ? ".x8" : ".x"));
    EXPECT_EQ(bits_of(ops::quantize_fp8(x, f->tensor(tag + ".input_scale"))), bits_of(f->tensor(n)))
        << n << " (" << x.describe() << ")";
    ++checked;
  }
  EXPECT_EQ(checked, 8);  // 2 dtypes x 2 layers x (x, x8)
}

TEST(Fp8ScaledReference, LinearMatchesTorchScaledMmWithinTheAccumulationBound) {
  const std::string path = test::fixture(kReferenceLinears);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (tools/parity/gen_fp8_reference.py)";
  const auto f = io::SafetensorsFile::open(path);
  int checked = 0;
  for (const std::string& n : f->names()) {
    if (!ends_with(n, ".input_scale")) continue;
    const std::string tag = n.substr(0, n.size() - std::string(".input_scale").size());
    const Tensor w = f->tensor(tag + ".weight"), ws = f->tensor(tag + ".weight_scale"),
                 is = f->tensor(n);
    const Tensor bias = f->contains(tag + ".bias") ? f->tensor(tag + ".bias") : Tensor();
    for (const char* which : {"", "8"}) {
      const Tensor x = f->tensor(tag + ".x" + which), want = f->tensor(tag + ".y" + which);
      const Tensor got = ops::linear_fp8_scaled(x, w, ws, is, bias);
      ASSERT_EQ(got.dtype(), want.dtype()) << tag;
      ASSERT_EQ(got.shape(), want.shape()) << tag;
      // torch._scaled_mm(use_fast_accum=True) sums the same exact e4m3 products on Hopper's FP8
      // tensor cores with partial sums of reduced precision; this CPU sums them in f32. Bound:
      // 2^-8 of the products' magnitude sum plus a rounding of the output dtype.
      const int64_t k = w.size(1);
      const Tensor q = ops::abs(ops::quantize_fp8(x, is).to(DType::F32));
      const std::vector<double> a =
          ops::linear(q.reshape({q.numel() / k, k}), ops::abs(w.to(DType::F32))).to_double_vector();
      const double s = is.item() * ws.item();
      const std::vector<double> g = got.to_double_vector(), r = want.to_double_vector();
      int bad = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        const double bound = std::ldexp(std::fabs(r[i]), -7) + std::ldexp(a[i] * s, -8);
        if (!(std::fabs(g[i] - r[i]) <= bound) && bad++ < 3)
          ADD_FAILURE() << tag << ".y" << which << " element " << i << ": got " << g[i]
                        << ", torch " << r[i] << " (bound " << bound << ")";
      }
      EXPECT_EQ(bad, 0) << tag << ".y" << which;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8);
}

}  // namespace
}  // namespace ltx::quantized_linear_test
