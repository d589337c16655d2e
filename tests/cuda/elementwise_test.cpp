// CUDA elementwise ops against the CPU ops on the same inputs: the arithmetic is bit-identical
// (shared per-element math, no FMA contraction), transcendentals agree to a few ulp; bf16 storage
// matches the CPU's f32 result rounded to bf16.
#include <gtest/gtest.h>

#include <array>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "ops/elementwise.h"
#include "support/test_support.h"

namespace ltx::elementwise_test {
namespace {

using ops::BinaryOp;
using ops::UnaryOp;
using test::kGpu;
using test::near;
using test::same_bytes;

constexpr BinaryOp kBinary[] = {BinaryOp::Add,     BinaryOp::Sub,     BinaryOp::Mul,
                                BinaryOp::Div,     BinaryOp::Maximum, BinaryOp::Minimum,
                                BinaryOp::Pow};
constexpr UnaryOp kUnary[] = {UnaryOp::Neg,     UnaryOp::Abs,      UnaryOp::Exp,  UnaryOp::Log,
                              UnaryOp::Sqrt,    UnaryOp::Rsqrt,    UnaryOp::Sin,  UnaryOp::Cos,
                              UnaryOp::Tanh,    UnaryOp::Sigmoid,  UnaryOp::Silu, UnaryOp::Relu,
                              UnaryOp::Square,  UnaryOp::Softplus, UnaryOp::Gelu, UnaryOp::GeluTanh};

// Ops whose CUDA result must equal the CPU's bit for bit (correctly rounded on both sides).
bool exact_unary(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt ||
         op == UnaryOp::Relu || op == UnaryOp::Square;
}

Tensor gpu(const Tensor& t) { return t.to(kGpu); }

TEST(CudaElementwise, BinaryOpsMatchCpuWithBroadcastingAndStrides) {
  LTX_REQUIRE_CUDA();
  const Shape out{3, 7, 33};
  const std::vector<Shape> b_shapes = {{3, 7, 33}, {7, 1}, {33}, {1, 7, 33}, {}, {3, 1, 1}};
  uint64_t seed = 1;
  for (BinaryOp op : kBinary) {
    for (const Shape& bs : b_shapes) {
      SCOPED_TRACE(std::string(ops::binary_op_name(op)) + " b=" + bs.str());
      const bool pow = op == BinaryOp::Pow;
      const Tensor a = test::random_tensor(out, seed++, pow ? 0.1f : -2.f, 2.f);
      const Tensor b = test::random_tensor(bs, seed++, pow ? -2.f : 0.5f, 2.f);
      const Tensor want = ops::binary(op, a, b);
      const Tensor got = ops::binary(op, gpu(a), gpu(b));
      EXPECT_EQ(got.device(), kGpu);
      EXPECT_EQ(got.dtype(), DType::F32);
      if (pow) {
        EXPECT_TRUE(near(got, want, 0, 1e-6));
      } else {
        EXPECT_TRUE(same_bytes(got, want));
      }
      // Strided inputs, and broadcasting from the left operand.
      const Tensor got_nc =
          ops::binary(op, test::non_contiguous_copy(gpu(a)), test::non_contiguous_copy(gpu(b)));
      EXPECT_TRUE(near(got_nc, want, 0, pow ? 1e-6 : 0));
      EXPECT_TRUE(near(ops::binary(op, gpu(b), gpu(a)), ops::binary(op, b, a), 0, pow ? 1e-6 : 0));
    }
    // Scalar right operand (pow exercises the exact rewrites 2, 0.5, -0.5, 1 and a general one).
    for (double s : {2.0, 0.5, -0.5, 1.0, 1.7, -3.0}) {
      const Tensor a = test::random_tensor({5, 129}, seed++, 0.25f, 3.f);
      EXPECT_TRUE(near(ops::binary(op, gpu(a), s), ops::binary(op, a, s), 0, 1e-6))
          << ops::binary_op_name(op) << " " << s;
    }
  }
}

TEST(CudaElementwise, MaximumMinimumPropagateNaN) {
  LTX_REQUIRE_CUDA();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor a = Tensor::from_vector(std::vector<float>{nan, 1.f, 2.f, nan}, {4});
  const Tensor b = Tensor::from_vector(std::vector<float>{0.f, nan, 3.f, nan}, {4});
  for (BinaryOp op : {BinaryOp::Maximum, BinaryOp::Minimum}) {
    const std::vector<float> g = ops::binary(op, gpu(a), gpu(b)).to_float_vector();
    EXPECT_TRUE(std::isnan(g[0]) && std::isnan(g[1]) && std::isnan(g[3]));
    EXPECT_EQ(g[2], op == BinaryOp::Maximum ? 3.f : 2.f);
  }
}

TEST(CudaElementwise, UnaryOpsMatchCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 100;
  for (UnaryOp op : kUnary) {
    SCOPED_TRACE(ops::unary_op_name(op));
    const bool positive = op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt;
    for (const Shape& shape : {Shape{1}, Shape{7, 33}, Shape{3, 129, 5}}) {
      const Tensor x = test::random_tensor(shape, seed++, positive ? 0.01f : -4.f, 4.f);
      const Tensor want = ops::unary(op, x);
      const Tensor got = ops::unary(op, test::non_contiguous_copy(gpu(x)));
      if (exact_unary(op)) {
        EXPECT_TRUE(same_bytes(got, want));
      } else {
        EXPECT_TRUE(near(got, want, 1e-6, 1e-6));
      }
    }
  }
  // Softplus' linear branch and large arguments.
  const Tensor big = Tensor::from_vector(std::vector<float>{19.f, 20.f, 20.5f, 50.f, -50.f}, {5});
  EXPECT_TRUE(near(ops::softplus(gpu(big)), ops::softplus(big), 0, 1e-6));
}

TEST(CudaElementwise, ClampWhereLerpModulateMatchCpu) {
  LTX_REQUIRE_CUDA();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = test::random_tensor({4, 33}, 7, -3.f, 3.f);
  x.narrow(1, 0, 1).fill(nan);
  EXPECT_TRUE(same_bytes(ops::clamp(gpu(x), -1.0, 2.0), ops::clamp(x, -1.0, 2.0)));
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(same_bytes(ops::clamp(gpu(x), 0.5, inf), ops::clamp(x, 0.5, inf)));

  const Tensor a = test::random_tensor({4, 33}, 8), b = test::random_tensor({33}, 9);
  const Tensor condf = ops::relu(test::random_tensor({4, 1}, 10));
  for (DType cd : {DType::F32, DType::Bool, DType::U8}) {
    const Tensor cond = condf.to(cd);
    EXPECT_TRUE(same_bytes(ops::where(gpu(cond), gpu(a), gpu(b)), ops::where(cond, a, b)))
        << dtype_name(cd);
  }
  const Tensor w = test::random_tensor({4, 33}, 11, -0.5f, 1.5f);
  EXPECT_TRUE(same_bytes(ops::lerp(gpu(a), gpu(b), gpu(w)), ops::lerp(a, b, w)));
  for (double ws : {0.0, 0.3, 0.5, 1.0})
    EXPECT_TRUE(same_bytes(ops::lerp(gpu(a), gpu(b), ws), ops::lerp(a, b, ws)));

  // AdaLN shapes: x [B, T, D], scale/shift [B, 1, D] or [B, T, D].
  const Tensor xm = test::random_tensor({2, 17, 64}, 12);
  const Tensor sc = test::random_tensor({2, 1, 64}, 13), sh = test::random_tensor({2, 17, 64}, 14);
  EXPECT_TRUE(same_bytes(ops::modulate(test::non_contiguous_copy(gpu(xm)), gpu(sc), gpu(sh)),
                         ops::modulate(xm, sc, sh)));
}

TEST(CudaElementwise, InPlaceOpsWriteThroughStridedViews) {
  LTX_REQUIRE_CUDA();
  const Tensor base = test::random_tensor({6, 40}, 20);
  const Tensor src = test::random_tensor({40}, 21);
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Mul}) {
    Tensor cpu_dst = base.clone(), gpu_dst = base.to(kGpu);
    // Every other row, columns 3..35: a strided destination.
    const Tensor cv = cpu_dst.slice(0, 0, 6, 2).narrow(1, 3, 33);
    const Tensor gv = gpu_dst.slice(0, 0, 6, 2).narrow(1, 3, 33);
    ops::binary_(op, cv, src.narrow(0, 0, 33));
    ops::binary_(op, gv, gpu(src).narrow(0, 0, 33));
    EXPECT_TRUE(same_bytes(gpu_dst, cpu_dst));  // untouched elements stay as they were
  }
}

TEST(CudaElementwise, Bf16StorageComputesInF32AndRoundsOnce) {
  LTX_REQUIRE_CUDA();
  const Tensor a = test::random_tensor({5, 67}, 30, -3.f, 3.f).to(DType::BF16);
  const Tensor b = test::random_tensor({67}, 31, 0.5f, 2.f).to(DType::BF16);
  const Tensor af = a.to(DType::F32), bf = b.to(DType::F32);
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div}) {
    const Tensor got = ops::binary(op, gpu(a), gpu(b));
    EXPECT_EQ(got.dtype(), DType::BF16);
    EXPECT_TRUE(same_bytes(got, ops::binary(op, af, bf).to(DType::BF16)));
    // bf16 with f32 promotes to f32.
    const Tensor mixed = ops::binary(op, gpu(a), gpu(bf));
    EXPECT_EQ(mixed.dtype(), DType::F32);
    EXPECT_TRUE(same_bytes(mixed, ops::binary(op, af, bf)));
  }
  for (UnaryOp op : {UnaryOp::Silu, UnaryOp::GeluTanh, UnaryOp::Gelu, UnaryOp::Exp}) {
    const Tensor got = ops::unary(op, gpu(a));
    EXPECT_EQ(got.dtype(), DType::BF16);
    // One bf16 rounding of nearly the same f32 value: at most one bf16 ulp apart.
    EXPECT_TRUE(near(got, ops::unary(op, af).to(DType::BF16), 1e-6, 1.0 / 128))
        << ops::unary_op_name(op);
  }
  EXPECT_TRUE(same_bytes(ops::modulate(gpu(a), gpu(b), gpu(b)),
                         ops::modulate(af, bf, bf).to(DType::BF16)));
  // In place on bf16 storage.
  const Tensor d = gpu(a).clone();
  ops::add_(d, gpu(b));
  EXPECT_TRUE(same_bytes(d, ops::add(af, bf).to(DType::BF16)));
}

// The 16-byte path's bf16 stores (pack_bf16x8: paired hardware conversions, NaN tested once per
// eight values) give the CPU conversion's bits (f32_to_bf16 in software): +0 + x stored as bf16
// for x of every sign and exponent with the mantissa bits around each rounding boundary (ties to
// even and odd, just above and below), subnormals, infinities and NaNs of many payloads, once in
// order (chunks of one exponent, NaNs beside infinities) and once shuffled (NaNs beside ordinary
// values). -0 is left out (+0 + -0 is +0).
TEST(CudaElementwise, Bf16VectorStoresRoundEveryBitPatternAsTheCpu) {
  LTX_REQUIRE_CUDA();
  std::vector<uint32_t> bits;
  const uint32_t low[] = {0x0000, 0x0001, 0x3fff, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff};
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t exp = 0; exp < 256; ++exp)
      for (uint32_t mant_hi = 0; mant_hi < 128; ++mant_hi)
        for (uint32_t lo : low) {
          const uint32_t b = (sign << 31) | (exp << 23) | (mant_hi << 16) | lo;
          bits.push_back(b == 0x80000000u ? 0u : b);
        }
  std::vector<uint32_t> shuffled = bits;
  uint64_t state = 12345;
  for (size_t i = shuffled.size() - 1; i > 0; --i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(shuffled[i], shuffled[(state >> 33) % (i + 1)]);
  }
  for (const auto* order : {&bits, &shuffled}) {
    std::vector<float> values(order->size());
    std::memcpy(values.data(), order->data(), values.size() * sizeof(float));
    const Tensor x = Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
    const Tensor dev = Tensor::zeros(x.shape(), DType::BF16, kGpu);
    ops::add_(dev, gpu(x));
    EXPECT_TRUE(same_bytes(dev, x.to(DType::BF16))) << (order == &bits ? "in order" : "shuffled");
  }
}

// The dense 16-byte path (contiguous, aligned operands, optionally a broadcast scalar) must give
// exactly what the strided loop gives: the strided loop is forced with a transposed copy of the
// same values, or a view offset by one element (not 16-byte aligned). Sizes cover n < 8, n % 8
// != 0 and many chunks; f32, bf16 and mixed storage; 1, 2 and 3 operands; in place.
TEST(CudaElementwise, DenseVectorPathEqualsStridedLoopBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 4000;
  for (int64_t n : {1, 7, 8, 9, 33, 1000, 65543}) {
    for (DType da : {DType::F32, DType::BF16}) {
      for (DType db : {DType::F32, DType::BF16}) {
        SCOPED_TRACE("n " + std::to_string(n) + " " + dtype_name(da) + "/" + dtype_name(db));
        const Tensor a = test::random_tensor({n}, seed++, -3.f, 3.f).to(kGpu, da);
        const Tensor b = test::random_tensor({n}, seed++, 0.5f, 2.f).to(kGpu, db);
        const Tensor c = test::random_tensor({n}, seed++).to(kGpu, db);
        // Strided copies with the same values: every other element of a 2n buffer.
        const auto strided = [](const Tensor& t) { return test::non_contiguous_copy(t); };
        // A view starting one element into a bigger buffer: contiguous but misaligned.
        const auto shifted = [&](const Tensor& t) {
          const Tensor buf = Tensor::zeros({n + 1}, t.dtype(), kGpu);
          const Tensor v = buf.narrow(0, 1, n);
          v.copy_from(t);
          return v;
        };
        for (BinaryOp op : {BinaryOp::Add, BinaryOp::Mul, BinaryOp::Div}) {
          const Tensor dense = ops::binary(op, a, b);
          EXPECT_TRUE(same_bytes(dense, ops::binary(op, strided(a), strided(b))))
              << ops::binary_op_name(op);
          EXPECT_TRUE(same_bytes(dense, ops::binary(op, shifted(a), b))) << ops::binary_op_name(op);
        }
        // A broadcast scalar operand (stride 0) stays on the dense path.
        const Tensor s = Tensor::full({1}, 1.7, db, kGpu);
        EXPECT_TRUE(same_bytes(ops::mul(a, s), ops::mul(strided(a), s)));
        EXPECT_TRUE(same_bytes(ops::silu(a), ops::silu(strided(a))));
        EXPECT_TRUE(same_bytes(ops::modulate(a, b, c), ops::modulate(strided(a), strided(b), c)));
        EXPECT_TRUE(same_bytes(ops::gated_add(a, b, c), ops::gated_add(strided(a), b, strided(c))));
        // In place: dst = dst + b on a contiguous dst vs a strided one.
        const Tensor d1 = a.clone(), d2 = strided(a);
        ops::add_(d1, b);
        ops::add_(d2, b);
        EXPECT_TRUE(same_bytes(d1, d2));
        // And against the CPU's f32 math on the same values, rounded once.
        const Tensor want = ops::add(a.to(Device::cpu(), DType::F32), b.to(Device::cpu(), DType::F32))
                                .to(ops::add(a, b).dtype());
        EXPECT_TRUE(same_bytes(ops::add(a, b).to(Device::cpu()), want));
      }
    }
  }
}

TEST(CudaElementwise, BroadcastVectorPathEqualsStridedLoopBitForBit) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 5000;
  // [B, T, D] against the broadcast forms the transformer uses: a row [1, 1, D], per-sample rows
  // [B, 1, D], a per-token gate [B, T, 1], a per-position table [1, T, D]; D a multiple of 8 (the
  // vector path) or not (the strided loop), plus the AdaLN table add [1, T, 9, D] + [1, 1, 9, D].
  for (const auto& [b, t, d] : {std::array<int64_t, 3>{1, 5, 8}, std::array<int64_t, 3>{2, 7, 64},
                                std::array<int64_t, 3>{3, 33, 24}, std::array<int64_t, 3>{2, 3, 12}}) {
    for (DType dx : {DType::F32, DType::BF16}) {
      for (DType dy : {DType::F32, DType::BF16}) {
        SCOPED_TRACE(std::to_string(b) + "x" + std::to_string(t) + "x" + std::to_string(d) + " " +
                     dtype_name(dx) + "/" + dtype_name(dy));
        const Tensor x = test::random_tensor({b, t, d}, seed++, -3.f, 3.f).to(kGpu, dx);
        const auto strided = [](const Tensor& v) { return test::non_contiguous_copy(v); };
        for (const Shape& ys : {Shape{1, 1, d}, Shape{b, 1, d}, Shape{b, t, 1}, Shape{1, t, d}}) {
          const Tensor y = test::random_tensor(ys, seed++, 0.5f, 2.f).to(kGpu, dy);
          const Tensor g = test::random_tensor(ys, seed++).to(kGpu, dy);
          EXPECT_TRUE(same_bytes(ops::add(x, y), ops::add(strided(x), strided(y)))) << ys.str();
          EXPECT_TRUE(same_bytes(ops::mul(y, x), ops::mul(strided(y), strided(x)))) << ys.str();
          EXPECT_TRUE(same_bytes(ops::gated_add(x, x, g), ops::gated_add(strided(x), x, strided(g))))
              << ys.str();
          EXPECT_TRUE(same_bytes(ops::modulate(x, y, g), ops::modulate(strided(x), strided(y), g)))
              << ys.str();
        }
        const Tensor table = test::random_tensor({1, 1, 9, d}, seed++).to(kGpu, dy);
        const Tensor per_token = test::random_tensor({1, t, 9, d}, seed++).to(kGpu, dx);
        EXPECT_TRUE(same_bytes(ops::add(table, per_token), ops::add(strided(table), strided(per_token))));
      }
    }
  }
}

TEST(CudaElementwise, Float64BinaryOpsEqualCpuBitForBit) {
  LTX_REQUIRE_CUDA();
  const BinaryOp f64_ops[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul,
                              BinaryOp::Div, BinaryOp::Maximum, BinaryOp::Minimum};
  const Shape out{3, 7, 33};
  const std::vector<Shape> b_shapes = {{3, 7, 33}, {7, 1}, {33}, {}, {3, 1, 1}};
  uint64_t seed = 300;
  for (BinaryOp op : f64_ops) {
    for (const Shape& bs : b_shapes) {
      SCOPED_TRACE(std::string(ops::binary_op_name(op)) + " b=" + bs.str());
      const Tensor a = test::random_f64(out, seed++, -2.0, 2.0), b = test::random_f64(bs, seed++, 0.25, 2.0);
      const Tensor got = ops::binary(op, gpu(a), gpu(b));
      EXPECT_EQ(got.device(), kGpu);
      EXPECT_EQ(got.dtype(), DType::F64);
      EXPECT_TRUE(same_bytes(got, ops::binary(op, a, b)));
      // A transposed operand, an f32 one and a bf16 one (widened exactly, as on the CPU).
      const Tensor at = gpu(a.transpose(0, 2).contiguous()).transpose(0, 2);
      EXPECT_TRUE(same_bytes(ops::binary(op, at, gpu(b)), ops::binary(op, a, b)));
      const Tensor f = test::random_tensor(out, seed++, -2.f, 2.f);
      EXPECT_TRUE(same_bytes(ops::binary(op, gpu(f), gpu(b)), ops::binary(op, f, b)));
      const Tensor h = f.to(DType::BF16);
      EXPECT_TRUE(same_bytes(ops::binary(op, gpu(b), gpu(h)), ops::binary(op, b, h.to(DType::F32))));
      EXPECT_TRUE(same_bytes(ops::binary(op, gpu(a), 0.1), ops::binary(op, a, 0.1)));
    }
  }
  EXPECT_ERROR_HAS(ops::pow(gpu(test::random_f64({3}, 1, 0.5, 1.0)), 2.0), "float64");
}

TEST(CudaElementwise, RejectsBadDtypesAndMixedDevices) {
  LTX_REQUIRE_CUDA();
  const Tensor a = Tensor::zeros({3}, DType::F32, kGpu);
  EXPECT_ERROR_HAS(ops::add(a, Tensor::zeros({3}, DType::F16, kGpu)), "f32 or bf16 on CUDA");
  EXPECT_ERROR_HAS(ops::add(a, Tensor::zeros({3})), "different devices");
  EXPECT_ERROR_HAS(ops::add(a, Tensor::zeros({4}, DType::F32, kGpu)), "broadcast");
  // The CPU still computes f32 only.
  EXPECT_ERROR_HAS(ops::add(Tensor::zeros({3}, DType::BF16), Tensor::zeros({3}, DType::BF16)),
                   "must be f32");
}

}  // namespace
}  // namespace ltx::elementwise_test
