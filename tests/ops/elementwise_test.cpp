#include "ops/elementwise.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "support/test_support.h"

namespace ltx::elementwise_test {
namespace {

using ops::BinaryOp;
using ops::UnaryOp;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// f evaluated in double over the NumPy broadcast of `ins` to `out`, in row-major order.
std::vector<double> reference(const Shape& out, const std::vector<Tensor>& ins,
                              const std::function<double(const std::vector<double>&)>& f) {
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ins) vals.push_back(t.to_double_vector());
  const int n = out.size();
  std::vector<double> res(static_cast<size_t>(out.numel()));
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<double> args(ins.size());
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rem = i;
    for (int d = n - 1; d >= 0; --d) {
      idx[d] = rem % out[d];
      rem /= out[d];
    }
    for (size_t k = 0; k < ins.size(); ++k) {
      const Tensor& t = ins[k];
      const int lead = n - t.dim();
      int64_t off = 0, mul = 1;
      for (int d = t.dim() - 1; d >= 0; --d) {
        off += (t.size(d) == 1 ? 0 : idx[d + lead]) * mul;
        mul *= t.size(d);
      }
      args[k] = vals[k][off];
    }
    res[i] = f(args);
  }
  return res;
}

// Every element within atol + rtol * |want| (NaN must match NaN); result dense f32 (contiguous,
// or laid out like a dense permuted input: see empty_like_layout).
void expect_close(const Tensor& got, const Shape& shape, const std::vector<double>& want,
                  double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  ASSERT_EQ(got.dtype(), DType::F32) << what;
  ASSERT_TRUE(got.is_dense()) << what;
  const std::vector<double> g = got.to_double_vector();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      ASSERT_TRUE(std::isnan(g[i])) << what << " at " << i << ": got " << g[i] << ", want NaN";
      continue;
    }
    if (std::isinf(want[i])) {
      ASSERT_EQ(g[i], want[i]) << what << " at " << i;
      continue;
    }
    ASSERT_LE(std::fabs(g[i] - want[i]), atol + rtol * std::fabs(want[i]))
        << what << " at " << i << ": got " << g[i] << ", want " << want[i];
  }
}

void expect_error_mentions(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected ltx::Error mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

double binary_ref(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Maximum: return std::max(a, b);
    case BinaryOp::Minimum: return std::min(a, b);
    case BinaryOp::Pow: return std::pow(a, b);
  }
  return kNaN;
}

const std::vector<BinaryOp> kBinaryOps = {BinaryOp::Add,     BinaryOp::Sub,     BinaryOp::Mul,
                                          BinaryOp::Div,     BinaryOp::Maximum, BinaryOp::Minimum,
                                          BinaryOp::Pow};

// Inputs with a safe domain for each op (positive bases for pow, denominators away from 0).
std::pair<Tensor, Tensor> binary_inputs(BinaryOp op, const Shape& sa, const Shape& sb,
                                        uint64_t seed) {
  if (op == BinaryOp::Pow)
    return {test::random_tensor(sa, seed, 0.1f, 3.f), test::random_tensor(sb, seed + 1, -2.f, 2.f)};
  if (op == BinaryOp::Div)
    return {test::random_tensor(sa, seed, -2.f, 2.f), test::random_tensor(sb, seed + 1, 0.5f, 2.f)};
  return {test::random_tensor(sa, seed, -2.f, 2.f), test::random_tensor(sb, seed + 1, -2.f, 2.f)};
}

TEST(Binary, MatchesDoubleReferenceWithBroadcasting) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{7}, {7}},          {{3, 33}, {3, 33}},       {{2, 1, 5}, {4, 1}},   {{1}, {7, 1, 129}},
      {{}, {3, 7}},        {{3, 7}, {}},             {{}, {}},              {{1, 1, 1}, {1}},
      {{129, 3}, {129, 1}}, {{2, 3, 4, 5}, {3, 1, 5}}, {{1, 2, 1, 3, 1, 2, 1, 3}, {2, 4, 3, 1, 2, 5, 1}}};
  uint64_t seed = 1;
  for (BinaryOp op : kBinaryOps) {
    for (const auto& [sa, sb] : cases) {
      auto [a, b] = binary_inputs(op, sa, sb, seed += 2);
      const Shape out = broadcast_shapes(sa, sb, "test");
      const auto want =
          reference(out, {a, b}, [op](const std::vector<double>& v) { return binary_ref(op, v[0], v[1]); });
      const std::string what = std::string(ops::binary_op_name(op)) + " " + sa.str() + " " + sb.str();
      expect_close(ops::binary(op, a, b), out, want, 1e-6, 1e-6, what);
      expect_close(ops::binary(op, test::non_contiguous_copy(a), b), out, want, 1e-6, 1e-6,
                   what + " (a non-contiguous)");
      expect_close(ops::binary(op, a, test::non_contiguous_copy(b)), out, want, 1e-6, 1e-6,
                   what + " (b non-contiguous)");
    }
  }
}

TEST(Binary, NamedOpsRouteToTheirOp) {
  const Tensor a = test::random_tensor({5}, 11, 0.5f, 2.f), b = test::random_tensor({5}, 12, 0.5f, 2.f);
  EXPECT_EQ(test::max_abs_diff(ops::add(a, b), ops::binary(BinaryOp::Add, a, b)), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::sub(a, b), ops::binary(BinaryOp::Sub, a, b)), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::mul(a, b), ops::binary(BinaryOp::Mul, a, b)), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::div(a, b), ops::binary(BinaryOp::Div, a, b)), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::maximum(a, b), ops::binary(BinaryOp::Maximum, a, b)), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::minimum(a, b), ops::binary(BinaryOp::Minimum, a, b)), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::pow(a, b), ops::binary(BinaryOp::Pow, a, b)), 0.0);
  EXPECT_GT(test::max_abs_diff(ops::add(a, b), ops::sub(a, b)), 0.0);
}

TEST(Binary, HandlesExpandedAndTransposedOperands) {
  // Stride-0 operands from expand() and a transposed view, in a tensor large enough to be split
  // over several threads.
  const Tensor row = test::random_tensor({1, 41, 1}, 21).expand({37, 41, 29});
  const Tensor col = test::random_tensor({37, 1, 29}, 22);
  const Tensor t = test::random_tensor({29, 41, 37}, 23).permute({2, 1, 0});
  const Shape out{37, 41, 29};
  expect_close(ops::add(row, col), out,
               reference(out, {row.contiguous(), col}, [](const auto& v) { return v[0] + v[1]; }),
               1e-6, 1e-6, "expanded + broadcast");
  expect_close(ops::mul(t, row), out,
               reference(out, {t.contiguous(), row.contiguous()}, [](const auto& v) { return v[0] * v[1]; }),
               1e-6, 1e-6, "transposed * expanded");
}

TEST(Binary, MaximumAndMinimumPropagateNaN) {
  const Tensor a = Tensor::from_vector<float>({1.f, NAN, 3.f}, {3});
  const Tensor b = Tensor::from_vector<float>({NAN, 2.f, 1.f}, {3});
  for (const Tensor& r : {ops::maximum(a, b), ops::minimum(a, b)}) {
    const auto v = r.to_double_vector();
    EXPECT_TRUE(std::isnan(v[0]));
    EXPECT_TRUE(std::isnan(v[1]));
  }
  EXPECT_EQ(ops::maximum(a, b).to_float_vector()[2], 3.f);
  EXPECT_EQ(ops::minimum(a, b).to_float_vector()[2], 1.f);
}

TEST(Binary, ScalarOverloadsMatchDoubleReference) {
  const Tensor x = test::random_tensor({3, 33}, 31, -2.f, 2.f);
  const Tensor xp = test::random_tensor({3, 33}, 32, 0.1f, 3.f);  // positive, for pow
  for (double s : {2.5, -1.5, 2.0, 0.5, 3.0, -0.5, 1.0, -2.0}) {
    for (BinaryOp op : kBinaryOps) {
      const Tensor& in = op == BinaryOp::Pow ? xp : x;
      const double sf = static_cast<float>(s);
      const auto want = reference(in.shape(), {in}, [&](const auto& v) { return binary_ref(op, v[0], sf); });
      const std::string what = std::string(ops::binary_op_name(op)) + " scalar " + std::to_string(s);
      expect_close(ops::binary(op, in, s), in.shape(), want, 1e-6, 1e-6, what);
      expect_close(ops::binary(op, test::non_contiguous_copy(in), s), in.shape(), want, 1e-6, 1e-6,
                   what + " (non-contiguous)");
    }
  }
  EXPECT_EQ(ops::add(Tensor::full({}, 1.5), 2.0).item(), 3.5);
  EXPECT_EQ(ops::mul(x, 2.0).shape(), x.shape());
  EXPECT_EQ(test::max_abs_diff(ops::sub(x, 1.0), ops::add(x, -1.0)), 0.0);
}

TEST(Binary, EdgeShapes) {
  const Tensor e = ops::add(Tensor::zeros({0, 3}), test::random_tensor({3}, 41));
  EXPECT_EQ(e.shape(), Shape({0, 3}));
  const Tensor s = ops::mul(Tensor::full({}, 3.0), Tensor::full({}, -2.0));
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item(), -6.0);
  const Tensor one = ops::sub(Tensor::full({1}, 5.0), Tensor::full({1, 1}, 2.0));
  EXPECT_EQ(one.shape(), Shape({1, 1}));
  EXPECT_EQ(one.item(), 3.0);
}

TEST(Binary, RejectsBadArguments) {
  const Tensor a = test::random_tensor({3, 4}, 51);
  expect_error_mentions([&] { ops::add(a, test::random_tensor({5}, 52)); }, "add");
  expect_error_mentions([&] { ops::mul(a, a.to(DType::I32)); }, "f32");
  expect_error_mentions([&] { ops::sub(a.to(DType::BF16), a); }, "f32");
  expect_error_mentions([&] { ops::pow(a.to(DType::I32), 2.0); }, "pow");
  EXPECT_THROW(ops::div(a, Tensor()), Error);
  EXPECT_THROW(ops::maximum(Tensor(), 1.0), Error);
}

// ---- float64 (the res_2s sampler's maths) ----

// got is f64 of `shape` and equal to want bit for bit (NaNs included).
void expect_same_f64(const Tensor& got, const Shape& shape, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::F64) << what;
  ASSERT_EQ(got.shape(), shape) << what;
  const std::vector<double> g = got.to_double_vector();
  ASSERT_EQ(g.size(), want.size()) << what;
  EXPECT_EQ(std::memcmp(g.data(), want.data(), 8 * g.size()), 0) << what;
}

const std::vector<BinaryOp> kF64Ops = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul,
                                       BinaryOp::Div, BinaryOp::Maximum, BinaryOp::Minimum};

TEST(BinaryF64, EqualsDoubleArithmeticBitForBitWithBroadcasting) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{7}, {7}}, {{2, 1, 5}, {4, 1}}, {{}, {3, 7}}, {{3, 40, 16}, {3, 40, 1}}, {{2, 3, 4, 5}, {3, 1, 5}}};
  uint64_t seed = 100;
  for (BinaryOp op : kF64Ops) {
    for (const auto& [sa, sb] : cases) {
      const Tensor a = test::random_f64(sa, seed++), b = test::random_f64(sb, seed++, 0.25, 2.0);
      const Shape out = broadcast_shapes(sa, sb, "test");
      const auto want = reference(out, {a, b}, [op](const std::vector<double>& v) { return binary_ref(op, v[0], v[1]); });
      const std::string what = std::string(ops::binary_op_name(op)) + " " + sa.str() + " " + sb.str();
      expect_same_f64(ops::binary(op, a, b), out, want, what);
      expect_same_f64(ops::binary(op, test::non_contiguous_copy(a), b), out, want, what + " (a non-contiguous)");
    }
  }
  // A transposed view and an expanded one.
  const Tensor t = test::random_f64({9, 5}, 7).permute({1, 0}), row = test::random_f64({1, 9}, 8).expand({5, 9});
  const auto want = reference({5, 9}, {t.contiguous(), row.contiguous()}, [](const auto& v) { return v[0] * v[1]; });
  expect_same_f64(ops::mul(t, row), {5, 9}, want, "transposed * expanded");
}

TEST(BinaryF64, AnF32OperandIsWidenedFirst) {
  const Tensor a = test::random_tensor({4, 33}, 9, -2.f, 2.f);
  const Tensor b = test::random_f64({33}, 10);
  for (BinaryOp op : kF64Ops) {
    const std::string what = std::string(ops::binary_op_name(op)) + " f32 . f64";
    const Tensor wide = a.to(DType::F64);
    expect_same_f64(ops::binary(op, a, b), a.shape(), ops::binary(op, wide, b).to_double_vector(), what);
    expect_same_f64(ops::binary(op, b, a), a.shape(), ops::binary(op, b, wide).to_double_vector(), what + " (swapped)");
  }
  // Not the f32 arithmetic: the f64 sum keeps bits an f32 sum rounds away.
  EXPECT_GT(test::max_abs_diff(ops::add(a, b), ops::add(a, b.to(DType::F32)).to(DType::F64)), 0.0);
}

TEST(BinaryF64, AScalarStaysDouble) {
  const Tensor x = test::random_f64({3, 17}, 11);
  const std::vector<double> xv = x.to_double_vector();
  for (BinaryOp op : kF64Ops) {
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) want[i] = binary_ref(op, xv[i], 0.1);
    expect_same_f64(ops::binary(op, x, 0.1), x.shape(), want, std::string(ops::binary_op_name(op)) + " scalar");
  }
  // 0.1 is not rounded to f32 first (as it is for an f32 tensor).
  EXPECT_NE(ops::mul(x, 0.1).to_double_vector(), ops::mul(x, static_cast<double>(0.1f)).to_double_vector());
}

TEST(BinaryF64, RejectsPowAndNonFloatOperands) {
  const Tensor x = test::random_f64({3}, 12);
  expect_error_mentions([&] { ops::pow(x, x); }, "float64");
  expect_error_mentions([&] { ops::pow(x, 3.0); }, "float64");
  expect_error_mentions([&] { ops::add(x, Tensor::zeros({3}, DType::I32)); }, "f32");
  expect_error_mentions([&] { ops::add(Tensor::zeros({3}, DType::BF16), x); }, "f32");
  expect_error_mentions([&] { ops::add(x, test::random_f64({4}, 13)); }, "add");
}

TEST(InPlace, AddUpdatesStridedViewWithBroadcastSource) {
  const Tensor big = test::random_tensor({6, 10}, 61);
  const std::vector<double> before = big.to_double_vector();
  const Tensor dst = big.slice(1, 1, 10, 2);  // [6, 5], strides (10, 2)
  const Tensor src = test::random_tensor({5}, 62);
  const auto sv = src.to_double_vector();
  ops::add_(dst, src);
  const std::vector<double> after = big.to_double_vector();
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 10; ++j) {
      const double want = j % 2 == 1 ? static_cast<float>(before[i * 10 + j] + sv[j / 2])
                                     : before[i * 10 + j];
      ASSERT_EQ(after[i * 10 + j], want) << i << "," << j;
    }
  }
}

TEST(InPlace, MulIntoTransposedViewMatchesReference) {
  const Tensor base = test::random_tensor({7, 33}, 71);
  const Tensor dst = base.transpose(0, 1);  // [33, 7], non-contiguous
  const Tensor src = test::random_tensor({33, 1}, 72);
  const auto want =
      reference(dst.shape(), {dst.contiguous(), src}, [](const auto& v) { return v[0] * v[1]; });
  ops::mul_(dst, src);
  expect_close(dst.contiguous(), dst.shape(), want, 0, 1e-7, "mul_");
}

TEST(InPlace, ResidualAccumulationOverManySteps) {
  // A residual stream: x += f_i for several i, checked against a double accumulation.
  Tensor x = test::random_tensor({4, 129}, 81);
  std::vector<double> acc = x.to_double_vector();
  for (int step = 0; step < 5; ++step) {
    const Tensor f = test::non_contiguous_copy(test::random_tensor({4, 129}, 82 + step));
    const auto fv = f.to_double_vector();
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += fv[i];
    ops::add_(x, f);
  }
  expect_close(x, Shape({4, 129}), acc, 1e-6, 1e-6, "residual");
}

// add_then_add_ is add_ twice, a bias broadcast per row (the CPU's in-place ops are f32; the CUDA
// kernel's bf16 rounding is tested in tests/cuda/channels_last_test.cpp).
TEST(InPlace, AddThenAddIsTwoAdds) {
  const Tensor dst = test::random_tensor({3, 8, 5}, 91);
  const Tensor bias = test::random_tensor({1, 8, 1}, 92);
  const Tensor res = test::non_contiguous_copy(test::random_tensor({3, 8, 5}, 93));
  const Tensor want = dst.clone();
  ops::add_(want, bias);
  ops::add_(want, res);
  ops::add_then_add_(dst, bias, res);
  EXPECT_EQ(test::max_abs_diff(dst, want), 0.0);
  expect_error_mentions(
      [&] { ops::add_then_add_(Tensor::zeros({1, 4}), Tensor::zeros({3, 4}), Tensor::zeros({4})); },
      "cannot be broadcast");
}

TEST(InPlace, RejectsBadArguments) {
  const Tensor dst = Tensor::zeros({3, 4});
  expect_error_mentions([&] { ops::add_(dst, Tensor::zeros({5, 4})); }, "add_");
  expect_error_mentions([&] { ops::add_(Tensor::zeros({1, 4}), Tensor::zeros({3, 4})); },
                        "cannot be broadcast");
  expect_error_mentions([&] { ops::mul_(Tensor::zeros({1, 4}).expand({3, 4}), dst); },
                        "expanded");
  expect_error_mentions([&] { ops::add_(dst.to(DType::F16), dst); }, "f32");
  EXPECT_THROW(ops::add_(dst, Tensor()), Error);
}

struct UnaryCase {
  UnaryOp op;
  double (*ref)(double);
  float lo, hi;
};

double sigmoid_d(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_d(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_d(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

const std::vector<UnaryCase> kUnaryCases = {
    {UnaryOp::Neg, [](double x) { return -x; }, -4, 4},
    {UnaryOp::Abs, [](double x) { return std::fabs(x); }, -4, 4},
    {UnaryOp::Exp, [](double x) { return std::exp(x); }, -4, 4},
    {UnaryOp::Log, [](double x) { return std::log(x); }, 0.05f, 4},
    {UnaryOp::Sqrt, [](double x) { return std::sqrt(x); }, 0, 4},
    {UnaryOp::Rsqrt, [](double x) { return 1.0 / std::sqrt(x); }, 0.05f, 4},
    {UnaryOp::Sin, [](double x) { return std::sin(x); }, -4, 4},
    {UnaryOp::Cos, [](double x) { return std::cos(x); }, -4, 4},
    {UnaryOp::Tanh, [](double x) { return std::tanh(x); }, -4, 4},
    {UnaryOp::Sigmoid, sigmoid_d, -6, 6},
    {UnaryOp::Silu, [](double x) { return x * sigmoid_d(x); }, -6, 6},
    {UnaryOp::Relu, [](double x) { return x > 0 ? x : 0.0; }, -4, 4},
    {UnaryOp::Square, [](double x) { return x * x; }, -4, 4},
    {UnaryOp::Softplus, [](double x) { return std::log1p(std::exp(x)); }, -6, 6},
    {UnaryOp::Gelu, gelu_d, -5, 5},
    {UnaryOp::GeluTanh, gelu_tanh_d, -5, 5},
};

TEST(Unary, MatchesDoubleReference) {
  const std::vector<Shape> shapes = {{}, {1}, {7}, {3, 33}, {5, 129}, {2, 3, 1, 4}};
  uint64_t seed = 100;
  for (const UnaryCase& c : kUnaryCases) {
    for (const Shape& s : shapes) {
      const Tensor x = test::random_tensor(s, ++seed, c.lo, c.hi);
      const auto want = reference(s, {x}, [&](const auto& v) { return c.ref(v[0]); });
      const std::string what = std::string(ops::unary_op_name(c.op)) + " " + s.str();
      expect_close(ops::unary(c.op, x), s, want, 1e-6, 2e-6, what);
      expect_close(ops::unary(c.op, test::non_contiguous_copy(x)), s, want, 1e-6, 2e-6,
                   what + " (non-contiguous)");
    }
  }
}

TEST(Unary, NamedOpsRouteToTheirOp) {
  const Tensor x = test::random_tensor({9}, 201, 0.1f, 2.f);
  const std::vector<std::pair<Tensor, UnaryOp>> named = {
      {ops::neg(x), UnaryOp::Neg},         {ops::abs(x), UnaryOp::Abs},
      {ops::exp(x), UnaryOp::Exp},         {ops::log(x), UnaryOp::Log},
      {ops::sqrt(x), UnaryOp::Sqrt},       {ops::rsqrt(x), UnaryOp::Rsqrt},
      {ops::sin(x), UnaryOp::Sin},         {ops::cos(x), UnaryOp::Cos},
      {ops::tanh(x), UnaryOp::Tanh},       {ops::sigmoid(x), UnaryOp::Sigmoid},
      {ops::silu(x), UnaryOp::Silu},       {ops::relu(x), UnaryOp::Relu},
      {ops::square(x), UnaryOp::Square},   {ops::softplus(x), UnaryOp::Softplus},
      {ops::gelu(x), UnaryOp::Gelu},       {ops::gelu_tanh(x), UnaryOp::GeluTanh}};
  for (const auto& [got, op] : named)
    EXPECT_EQ(test::max_abs_diff(got, ops::unary(op, x)), 0.0) << ops::unary_op_name(op);
}

TEST(Unary, GeluIsTheErfFormAndGeluTanhTheApproximation) {
  const Tensor x = test::random_tensor({257}, 211, -6.f, 6.f);
  const auto xv = x.to_double_vector();
  std::vector<double> erf_form, tanh_form;
  for (double v : xv) {
    erf_form.push_back(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
    tanh_form.push_back(0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  expect_close(ops::gelu(x), x.shape(), erf_form, 1e-6, 1e-6, "gelu");
  expect_close(ops::gelu_tanh(x), x.shape(), tanh_form, 1e-6, 1e-6, "gelu_tanh");
  // The two differ by more than the tolerance somewhere, so a swap would be caught.
  EXPECT_GT(test::max_abs_diff(ops::gelu(x), ops::gelu_tanh(x)), 1e-4);
}

TEST(Unary, SaturatingActivationsStayFiniteAtExtremes) {
  const Tensor x = Tensor::from_vector<float>({-100.f, -30.f, 0.f, 30.f, 100.f}, {5});
  const auto xv = x.to_double_vector();
  std::vector<double> sig, silu, sp;
  for (double v : xv) {
    sig.push_back(sigmoid_d(v));
    silu.push_back(v * sigmoid_d(v));
    sp.push_back(v > 20 ? v : std::log1p(std::exp(v)));
  }
  expect_close(ops::sigmoid(x), x.shape(), sig, 1e-30, 1e-6, "sigmoid extremes");
  expect_close(ops::silu(x), x.shape(), silu, 1e-30, 1e-6, "silu extremes");
  expect_close(ops::softplus(x), x.shape(), sp, 1e-30, 1e-6, "softplus extremes");
  expect_close(ops::tanh(x), x.shape(), {-1, -1, 0, 1, 1}, 0, 1e-7, "tanh extremes");
}

TEST(Unary, ReluAndNonFiniteInputs) {
  const Tensor x = Tensor::from_vector<float>({NAN, -INFINITY, INFINITY, -0.5f}, {4});
  expect_close(ops::relu(x), x.shape(), {kNaN, 0, kInf, 0}, 0, 0, "relu");
  expect_close(ops::exp(x), x.shape(), {kNaN, 0, kInf, std::exp(-0.5)}, 1e-7, 1e-7, "exp");
}

TEST(Unary, EmptyAndRejectsBadDtype) {
  EXPECT_EQ(ops::exp(Tensor::zeros({0})).shape(), Shape({0}));
  EXPECT_EQ(ops::gelu(Tensor::zeros({2, 0, 3})).numel(), 0);
  expect_error_mentions([] { ops::tanh(Tensor::zeros({3}, DType::BF16)); }, "tanh");
  expect_error_mentions([] { ops::silu(Tensor::zeros({3}, DType::F64)); }, "f32");
  EXPECT_THROW(ops::relu(Tensor()), Error);
}

TEST(Clamp, MatchesReferenceAndKeepsNaN) {
  const Tensor x = test::random_tensor({5, 33}, 301, -3.f, 3.f);
  const auto want = reference(x.shape(), {x}, [](const auto& v) { return std::min(std::max(v[0], -1.0), 0.5); });
  expect_close(ops::clamp(test::non_contiguous_copy(x), -1.0, 0.5), x.shape(), want, 0, 0, "clamp");
  const Tensor y = Tensor::from_vector<float>({NAN, -5.f, 5.f}, {3});
  expect_close(ops::clamp(y, -1.0, 1.0), y.shape(), {kNaN, -1, 1}, 0, 0, "clamp NaN");
  expect_close(ops::clamp(y, -kInf, 1.0), y.shape(), {kNaN, -5, 1}, 0, 0, "clamp one-sided");
  // lo > hi gives hi everywhere, as torch.clamp does.
  expect_close(ops::clamp(Tensor::from_vector<float>({-2.f, 0.f, 2.f}, {3}), 1.0, -1.0), Shape({3}),
               {-1, -1, -1}, 0, 0, "clamp lo > hi");
  EXPECT_THROW(ops::clamp(Tensor::zeros({2}, DType::I64), 0, 1), Error);
}

Tensor bool_tensor(const std::vector<uint8_t>& v, const Shape& s, DType dt) {
  return Tensor::from_vector<uint8_t>(v, s).to(dt);
}

TEST(Where, BroadcastsConditionOfEachDtype) {
  const std::vector<uint8_t> bits = {1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1};
  const Tensor a = test::random_tensor({4, 1}, 401);
  const Tensor b = Tensor::full({}, -7.0);
  for (DType dt : {DType::Bool, DType::U8, DType::F32}) {
    const Tensor cond = bool_tensor(bits, {3, 1, 5}, dt);
    const Shape out{3, 4, 5};
    const auto want = reference(out, {cond.to(DType::F32), a, b},
                                [](const auto& v) { return v[0] != 0 ? v[1] : v[2]; });
    expect_close(ops::where(cond, a, b), out, want, 0, 0, dtype_name(dt));
    expect_close(ops::where(test::non_contiguous_copy(cond), test::non_contiguous_copy(a), b), out,
                 want, 0, 0, std::string(dtype_name(dt)) + " non-contiguous");
  }
  // f32 conditions: any nonzero (NaN included) is true, -0 is false.
  const Tensor fc = Tensor::from_vector<float>({0.5f, -0.f, NAN, 0.f}, {4});
  expect_close(ops::where(fc, Tensor::full({4}, 1.0), Tensor::full({4}, 2.0)), Shape({4}),
               {1, 2, 1, 2}, 0, 0, "f32 cond");
}

TEST(Where, RejectsBadArguments) {
  const Tensor a = Tensor::zeros({3});
  expect_error_mentions([&] { ops::where(Tensor::zeros({3}, DType::I64), a, a); }, "cond");
  expect_error_mentions([&] { ops::where(a, a.to(DType::BF16), a); }, "f32");
  expect_error_mentions([&] { ops::where(Tensor::zeros({4}), a, a); }, "where");
  EXPECT_THROW(ops::where(Tensor(), a, a), Error);
}

TEST(Lerp, MatchesReferenceWithTensorAndScalarWeights) {
  const Tensor a = test::random_tensor({3, 7}, 501), b = test::random_tensor({7}, 502);
  const Tensor w = test::random_tensor({3, 1}, 503, -0.5f, 1.5f);
  const Shape out{3, 7};
  const auto want = reference(out, {a, b, w}, [](const auto& v) { return v[0] + v[2] * (v[1] - v[0]); });
  expect_close(ops::lerp(test::non_contiguous_copy(a), b, w), out, want, 1e-6, 1e-6, "lerp");
  const auto want_s = reference(out, {a, b}, [](const auto& v) { return v[0] + 0.25 * (v[1] - v[0]); });
  expect_close(ops::lerp(a, b, 0.25), out, want_s, 1e-6, 1e-6, "lerp scalar");
  // Exact at both ends.
  EXPECT_EQ(test::max_abs_diff(ops::lerp(a, b, 0.0), a), 0.0);
  EXPECT_EQ(test::max_abs_diff(ops::lerp(a, b, 1.0), b.expand(out)), 0.0);
  EXPECT_THROW(ops::lerp(a, test::random_tensor({4}, 504), w), Error);
  EXPECT_THROW(ops::lerp(a, b, w.to(DType::F64)), Error);
}

TEST(Modulate, MatchesReferenceAndUnfusedComposition) {
  const Tensor x = test::random_tensor({2, 5, 33}, 601);
  const Tensor scale = test::random_tensor({2, 1, 33}, 602), shift = test::random_tensor({2, 1, 33}, 603);
  const Shape out{2, 5, 33};
  const auto want = reference(out, {x, scale, shift}, [](const auto& v) { return v[0] * (1 + v[1]) + v[2]; });
  const Tensor got = ops::modulate(test::non_contiguous_copy(x), scale, shift);
  expect_close(got, out, want, 1e-6, 1e-6, "modulate");
  const Tensor unfused = ops::add(ops::mul(x, ops::add(scale, 1.0)), shift);
  EXPECT_EQ(test::max_abs_diff(got, unfused), 0.0);
  // Per-token scale/shift ([B, T, 1]) and a 0-d x.
  const Tensor st = test::random_tensor({2, 5, 1}, 604);
  expect_close(ops::modulate(x, st, st), out,
               reference(out, {x, st, st}, [](const auto& v) { return v[0] * (1 + v[1]) + v[2]; }), 1e-6,
               1e-6, "modulate per token");
  EXPECT_EQ(ops::modulate(Tensor::full({}, 2.0), Tensor::full({}, 0.5), Tensor::full({}, 1.0)).item(), 4.0);
  EXPECT_THROW(ops::modulate(x, test::random_tensor({3, 1, 33}, 605), shift), Error);
  EXPECT_THROW(ops::modulate(x, scale, shift.to(DType::BF16)), Error);
}

TEST(GatedAdd, MatchesReferenceAndUnfusedCompositionWithBroadcasting) {
  uint64_t seed = 700;
  const auto f = [](const auto& v) { return v[0] + v[1] * v[2]; };
  // (x, y, gate) shapes: per-sample and per-token gates, a broadcast x, odd sizes.
  const std::vector<std::array<Shape, 3>> cases = {
      {Shape{2, 5, 33}, Shape{2, 5, 33}, Shape{2, 1, 33}},
      {Shape{1, 7, 3}, Shape{1, 7, 3}, Shape{1, 7, 3}},
      {Shape{3, 129}, Shape{3, 129}, Shape{129}},
      {Shape{1, 1}, Shape{4, 1}, Shape{1, 9}},
      {Shape{2, 3, 1}, Shape{2, 3, 7}, Shape{2, 1, 1}}};
  for (const auto& [sx, sy, sg] : cases) {
    const Tensor x = test::random_tensor(sx, seed++), y = test::random_tensor(sy, seed++, -3.f, 3.f);
    const Tensor g = test::random_tensor(sg, seed++);
    const Shape out = broadcast_shapes(broadcast_shapes(sx, sy, "t"), sg, "t");
    const Tensor got = ops::gated_add(test::non_contiguous_copy(x), test::non_contiguous_copy(y), g);
    expect_close(got, out, reference(out, {x, y, g}, f), 1e-6, 1e-6, "gated_add " + out.str());
    EXPECT_EQ(test::max_abs_diff(got, ops::add(x, ops::mul(y, g))), 0.0) << out.str();
  }
  // Guards against the gate being ignored.
  const Tensor x = test::random_tensor({4, 8}, 790), y = test::random_tensor({4, 8}, 791);
  EXPECT_GT(test::max_abs_diff(ops::gated_add(x, y, Tensor::full({1}, 0.25)), ops::add(x, y)), 1e-3);
}

TEST(SiluMul, MatchesReferenceAndUnfusedCompositionWithBroadcasting) {
  uint64_t seed = 720;
  const auto f = [](const auto& v) { return v[0] / (1.0 + std::exp(-v[0])) * v[1]; };
  const std::vector<std::array<Shape, 2>> cases = {
      {Shape{3, 129}, Shape{3, 129}}, {Shape{2, 7, 33}, Shape{2, 1, 33}}, {Shape{1}, Shape{5, 3}}};
  for (const auto& [sg, su] : cases) {
    const Tensor g = test::random_tensor(sg, seed++, -6.f, 6.f), u = test::random_tensor(su, seed++);
    const Shape out = broadcast_shapes(sg, su, "t");
    const Tensor got = ops::silu_mul(test::non_contiguous_copy(g), test::non_contiguous_copy(u));
    expect_close(got, out, reference(out, {g, u}, f), 1e-6, 1e-6, "silu_mul " + out.str());
    EXPECT_EQ(test::max_abs_diff(got, ops::mul(ops::silu(g), u)), 0.0) << out.str();
  }
  const Tensor x = test::random_tensor({2, 3}, 730);
  expect_error_mentions([&] { ops::silu_mul(x, test::random_tensor({4, 3}, 731)); }, "silu_mul");
  expect_error_mentions([&] { ops::silu_mul(x, x.to(DType::F64)); }, "f32");
  EXPECT_THROW(ops::silu_mul(x, Tensor()), Error);
}

TEST(Mul2Sigmoid, MatchesReferenceAndUnfusedCompositionWithBroadcasting) {
  uint64_t seed = 740;
  const auto f = [](const auto& v) { return v[0] * (2.0 / (1.0 + std::exp(-v[1]))); };
  // (x, logits): the per-head gate [B, T, H, 1] against [B, T, H, Dh], and odd shapes.
  const std::vector<std::array<Shape, 2>> cases = {
      {Shape{2, 5, 3, 16}, Shape{2, 5, 3, 1}}, {Shape{3, 129}, Shape{3, 129}}, {Shape{1, 7}, Shape{4, 1}}};
  for (const auto& [sx, sl] : cases) {
    const Tensor x = test::random_tensor(sx, seed++, -3.f, 3.f), l = test::random_tensor(sl, seed++, -8.f, 8.f);
    const Shape out = broadcast_shapes(sx, sl, "t");
    const Tensor got = ops::mul_2sigmoid(test::non_contiguous_copy(x), test::non_contiguous_copy(l));
    expect_close(got, out, reference(out, {x, l}, f), 1e-6, 1e-6, "mul_2sigmoid " + out.str());
    EXPECT_EQ(test::max_abs_diff(got, ops::mul(x, ops::mul(ops::sigmoid(l), 2.0))), 0.0) << out.str();
  }
  const Tensor x = test::random_tensor({2, 3}, 760);
  expect_error_mentions([&] { ops::mul_2sigmoid(x, test::random_tensor({4, 3}, 761)); }, "mul_2sigmoid");
  expect_error_mentions([&] { ops::mul_2sigmoid(x, x.to(DType::F64)); }, "f32");
  EXPECT_THROW(ops::mul_2sigmoid(x, Tensor()), Error);
}

TEST(GatedAdd, RejectsBadArguments) {
  const Tensor x = test::random_tensor({2, 3}, 800);
  expect_error_mentions([&] { ops::gated_add(x, test::random_tensor({4, 3}, 801), x); }, "gated_add");
  expect_error_mentions([&] { ops::gated_add(x, x, x.to(DType::F64)); }, "f32");
  expect_error_mentions([&] { ops::gated_add(x.to(DType::BF16), x, x); }, "f32");
  EXPECT_THROW(ops::gated_add(x, Tensor(), x), Error);
  EXPECT_EQ(ops::gated_add(Tensor::zeros({0, 3}), Tensor::zeros({3}), Tensor::zeros({1})).shape(),
            Shape({0, 3}));
}

}  // namespace
}  // namespace ltx::elementwise_test
