#include "ops/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "support/test_support.h"

namespace ltx::reduce_test {
namespace {

using Values = std::vector<double>;
using Fold = std::function<double(const Values&)>;

struct Ref {
  Shape shape;
  Values values;
};

// Naive reduction in double: groups the elements of x by their position in the kept dims.
Ref ref_reduce(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, const Fold& f) {
  const int nd = x.dim();
  std::vector<bool> red(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) red[(d + nd) % nd] = true;
  Ref r;
  int64_t nout = 1;
  for (int d = 0; d < nd; ++d) {
    if (!red[d]) {
      r.shape.push_back(x.size(d));
      nout *= x.size(d);
    } else if (keepdim) {
      r.shape.push_back(1);
    }
  }
  std::vector<Values> groups(static_cast<size_t>(nout));
  const Values v = x.to_double_vector();
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t id = rem % x.size(d);
      rem /= x.size(d);
      if (!red[d]) {
        o += id * mul;
        mul *= x.size(d);
      }
    }
    groups[o].push_back(v[i]);
  }
  for (const Values& g : groups) r.values.push_back(f(g));
  return r;
}

double sum_of(const Values& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double mean_of(const Values& g) { return sum_of(g) / static_cast<double>(g.size()); }
double max_of(const Values& g) { return *std::max_element(g.begin(), g.end()); }
double min_of(const Values& g) { return *std::min_element(g.begin(), g.end()); }
Fold var_with(int64_t correction) {
  return [correction](const Values& g) {
    const double m = mean_of(g);
    double s = 0;
    for (double v : g) s += (v - m) * (v - m);
    return s / static_cast<double>(static_cast<int64_t>(g.size()) - correction);
  };
}
double argmax_of(const Values& g) {
  size_t best = 0;
  for (size_t i = 1; i < g.size(); ++i)
    if (g[i] > g[best]) best = i;
  return static_cast<double>(best);
}

void expect_close(const Tensor& got, const Ref& want, double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape) << what;
  ASSERT_TRUE(got.is_contiguous()) << what;
  const Values g = got.to_double_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want.values[i])) {
      ASSERT_TRUE(std::isnan(g[i])) << what << " at " << i;
      continue;
    }
    if (std::isinf(want.values[i])) {  // e.g. var with N - correction == 0
      ASSERT_EQ(g[i], want.values[i]) << what << " at " << i;
      continue;
    }
    ASSERT_LE(std::fabs(g[i] - want.values[i]), atol + rtol * std::fabs(want.values[i]))
        << what << " at " << i << ": got " << g[i] << ", want " << want.values[i];
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

std::string dims_str(const std::vector<int64_t>& dims, bool keepdim) {
  std::string s = "dims {";
  for (int64_t d : dims) s += std::to_string(d) + " ";
  return s + "} keepdim " + (keepdim ? "1" : "0");
}

const std::vector<std::vector<int64_t>> kDimLists = {{},     {0},    {1},    {-1},   {3},
                                                     {0, 2}, {1, 2}, {0, 3}, {2, 0}, {0, 1, 2, 3}};

// The same values as contiguous, padded-transposed and permuted views.
std::vector<std::pair<Tensor, std::string>> layouts(const Tensor& x) {
  return {{x, "contiguous"},
          {test::non_contiguous_copy(x), "non-contiguous"},
          {x.permute({3, 2, 1, 0}).contiguous().permute({3, 2, 1, 0}), "permuted"}};
}

TEST(Reduce, SumMeanAmaxAminMatchDoubleReference) {
  const Tensor base = test::random_tensor({3, 5, 7, 2}, 1, -2.f, 2.f);
  for (const auto& [x, layout] : layouts(base)) {
    for (const auto& dims : kDimLists) {
      for (bool keepdim : {false, true}) {
        const std::string what = layout + " " + dims_str(dims, keepdim);
        expect_close(ops::sum(x, dims, keepdim), ref_reduce(base, dims, keepdim, sum_of), 1e-6, 1e-6,
                     "sum " + what);
        expect_close(ops::mean(x, dims, keepdim), ref_reduce(base, dims, keepdim, mean_of), 1e-7, 1e-6,
                     "mean " + what);
        expect_close(ops::amax(x, dims, keepdim), ref_reduce(base, dims, keepdim, max_of), 0, 0,
                     "amax " + what);
        expect_close(ops::amin(x, dims, keepdim), ref_reduce(base, dims, keepdim, min_of), 0, 0,
                     "amin " + what);
      }
    }
  }
}

TEST(Reduce, VarAndStdMatchDoubleReferenceForEachCorrection) {
  const Tensor base = test::random_tensor({3, 5, 7, 2}, 2, -2.f, 2.f);
  for (const auto& [x, layout] : layouts(base)) {
    for (const auto& dims : kDimLists) {
      for (bool keepdim : {false, true}) {
        const std::string what = layout + " " + dims_str(dims, keepdim);
        for (int64_t c : {0, 1, 2}) {
          expect_close(ops::var(x, dims, c, keepdim), ref_reduce(base, dims, keepdim, var_with(c)), 1e-7,
                       1e-6, "var c=" + std::to_string(c) + " " + what);
        }
        const Fold sd = [](const Values& g) { return std::sqrt(var_with(1)(g)); };
        expect_close(ops::std(x, dims, 1, keepdim), ref_reduce(base, dims, keepdim, sd), 1e-7, 1e-6,
                     "std " + what);
      }
    }
  }
  // Defaults are unbiased over all dims.
  expect_close(ops::var(base), ref_reduce(base, {}, false, var_with(1)), 1e-7, 1e-6, "var default");
}

TEST(Reduce, EightDimsWithScatteredReducedDims) {
  const Tensor base = test::random_tensor({2, 3, 1, 2, 3, 2, 1, 3}, 12);
  const Tensor x = test::non_contiguous_copy(base);
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{1, 3, 5, 7}, {0, 6}, {-8, -1}}) {
    for (bool keepdim : {false, true}) {
      expect_close(ops::sum(x, dims, keepdim), ref_reduce(base, dims, keepdim, sum_of), 1e-6, 1e-6,
                   "sum 8-d " + dims_str(dims, keepdim));
      expect_close(ops::amax(x, dims, keepdim), ref_reduce(base, dims, keepdim, max_of), 0, 0,
                   "amax 8-d " + dims_str(dims, keepdim));
    }
  }
}

TEST(Reduce, VarStaysAccurateWithLargeMean) {
  // A two-pass variance; E[x^2] - E[x]^2 in float would lose every digit here.
  std::vector<float> v(4000);
  const Values r = test::random_tensor({4000}, 4, -1.f, 1.f).to_double_vector();
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(1e4 + r[i]);
  const Tensor big = Tensor::from_vector(v, {4, 1000});
  expect_close(ops::var(big, {1}, 0), ref_reduce(big, {1}, false, var_with(0)), 0, 1e-6, "var 1e4 offset");
}

TEST(Reduce, MillionElementSumsMatchDoubleReference) {
  // Float accumulation would be off by ~1e-4 relative here; double accumulation is not.
  const Tensor x = test::random_tensor({1 << 20}, 5, 0.5f, 1.5f);
  const Values v = x.to_double_vector();
  const double want = sum_of(v);
  EXPECT_LE(std::fabs(ops::sum(x).item() - want), 1e-6 * want);
  EXPECT_LE(std::fabs(ops::mean(x).item() - want / static_cast<double>(v.size())), 1e-6);
  const double var = var_with(1)(v);
  EXPECT_LE(std::fabs(ops::var(x).item() - var), 1e-6 * var);
  // Long columns (reduce over dim 0 of [40000, 3]).
  const Tensor cols = test::random_tensor({40000, 3}, 6, 0.5f, 1.5f);
  expect_close(ops::sum(cols, {0}), ref_reduce(cols, {0}, false, sum_of), 0, 1e-6, "column sums");
}

TEST(Reduce, ResultDoesNotDependOnThreadCount) {
  const Tensor x = test::random_tensor({3, 70000}, 7);
  const int before = num_threads();
  set_num_threads(1);
  const Tensor one = ops::sum(x, {1});
  const Tensor one_var = ops::var(x, {1});
  set_num_threads(3);
  const Tensor three = ops::sum(x, {1});
  const Tensor three_var = ops::var(x, {1});
  set_num_threads(before);
  EXPECT_EQ(test::max_abs_diff(one, three), 0.0);
  EXPECT_EQ(test::max_abs_diff(one_var, three_var), 0.0);
}

TEST(Reduce, EdgeCases) {
  const Tensor s = Tensor::full({}, 2.5);
  EXPECT_EQ(ops::sum(s).dim(), 0);
  EXPECT_EQ(ops::sum(s).item(), 2.5);
  EXPECT_EQ(ops::mean(s, {0}).item(), 2.5);
  EXPECT_EQ(ops::amax(s, {-1}, true).item(), 2.5);
  EXPECT_TRUE(std::isnan(ops::var(s).item()));  // one element, unbiased: 0 / 0
  EXPECT_EQ(ops::var(s, {}, 0).item(), 0.0);
  const Tensor one = Tensor::full({1, 1}, -3.0);
  EXPECT_EQ(ops::sum(one, {}, true).shape(), Shape({1, 1}));
  EXPECT_EQ(ops::amin(one, {1}).shape(), Shape({1}));
  // Reducing over an empty dim: sum 0, mean NaN.
  const Tensor e = Tensor::zeros({2, 0});
  EXPECT_EQ(ops::sum(e, {1}).to_float_vector(), (std::vector<float>{0.f, 0.f}));
  EXPECT_TRUE(std::isnan(ops::mean(e, {1}).to_float_vector()[0]));
  EXPECT_EQ(ops::sum(e, {0}).shape(), Shape({0}));
  // NaN propagates through amax / amin.
  const Tensor n = Tensor::from_vector<float>({1.f, NAN, 3.f}, {3});
  EXPECT_TRUE(std::isnan(ops::amax(n).item()));
  EXPECT_TRUE(std::isnan(ops::amin(n).item()));
}

TEST(Reduce, RejectsBadArguments) {
  const Tensor x = test::random_tensor({2, 3}, 8);
  expect_error_mentions([&] { ops::sum(x, {2}); }, "sum");
  expect_error_mentions([&] { ops::mean(x, {-3}); }, "out of range");
  expect_error_mentions([&] { ops::amax(x, {1, -1}); }, "more than once");
  expect_error_mentions([&] { ops::sum(x.to(DType::F64)); }, "f32");
  expect_error_mentions([&] { ops::amin(x.to(DType::BF16), {0}); }, "f32");
  expect_error_mentions([&] { ops::amax(Tensor::zeros({2, 0}), {1}); }, "size 0");
  expect_error_mentions([&] { ops::var(x, {0}, -1); }, "correction");
  EXPECT_THROW(ops::std(Tensor()), Error);
}

TEST(Argmax, MatchesReferenceOnEveryDim) {
  const Tensor base = test::random_tensor({4, 7, 5}, 9);
  for (const Tensor& x : {base, test::non_contiguous_copy(base)}) {
    for (int64_t dim : {0, 1, 2, -1}) {
      for (bool keepdim : {false, true}) {
        const Tensor got = ops::argmax(x, dim, keepdim);
        EXPECT_EQ(got.dtype(), DType::I64);
        expect_close(got, ref_reduce(base, {dim}, keepdim, argmax_of), 0, 0,
                     "argmax dim " + std::to_string(dim));
      }
    }
  }
}

TEST(Argmax, PicksFirstOfTiesAndFirstNaN) {
  EXPECT_EQ(ops::argmax(Tensor::from_vector<float>({1, 3, 3, 2}, {4}), 0).item(), 1.0);
  EXPECT_EQ(ops::argmax(Tensor::from_vector<float>({1, NAN, 5, NAN}, {4}), 0).item(), 1.0);
  EXPECT_EQ(ops::argmax(Tensor::from_vector<float>({-INFINITY, -INFINITY}, {2}), 0).item(), 0.0);
  EXPECT_EQ(ops::argmax(Tensor::full({}, 4.0), 0).item(), 0.0);
  EXPECT_EQ(ops::argmax(Tensor::full({}, 4.0), 0).dim(), 0);
  // Rows longer than one work chunk: the maximum and its later tie sit in different chunks.
  std::vector<float> v(40000, 0.f);
  v[30000] = 2.f;
  v[35000] = 2.f;
  v[100] = 1.f;
  EXPECT_EQ(ops::argmax(Tensor::from_vector(v, {40000}), 0).item(), 30000.0);
  v[5] = 2.f;
  EXPECT_EQ(ops::argmax(Tensor::from_vector(v, {1, 40000}), 1).to_int_vector(), std::vector<int64_t>{5});
}

TEST(Argmax, RejectsBadArguments) {
  expect_error_mentions([] { ops::argmax(Tensor::zeros({2, 3}), 2); }, "argmax");
  expect_error_mentions([] { ops::argmax(Tensor::zeros({2, 0}), 1); }, "size 0");
  expect_error_mentions([] { ops::argmax(Tensor::zeros({3}, DType::I64), 0); }, "f32");
}

// Softmax (or log-softmax) of x along dim, in double, in x's row-major order.
Values ref_softmax(const Tensor& x, int dim, bool log) {
  const int nd = x.dim();
  const Values v = x.to_double_vector();
  Values out(v.size());
  int64_t inner = 1;
  for (int d = dim + 1; d < nd; ++d) inner *= x.size(d);
  const int64_t D = x.size(dim), outer = x.numel() / (D * inner);
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t b = 0; b < inner; ++b) {
      double m = -INFINITY, s = 0;
      for (int64_t d = 0; d < D; ++d) m = std::max(m, v[(a * D + d) * inner + b]);
      for (int64_t d = 0; d < D; ++d) s += std::exp(v[(a * D + d) * inner + b] - m);
      for (int64_t d = 0; d < D; ++d) {
        const double xv = v[(a * D + d) * inner + b];
        out[(a * D + d) * inner + b] = log ? xv - m - std::log(s) : std::exp(xv - m) / s;
      }
    }
  }
  return out;
}

TEST(Softmax, MatchesDoubleReferenceAlongEveryDim) {
  for (const Shape& shape : {Shape{3, 5, 7}, Shape{3, 5, 300}, Shape{129}, Shape{2, 1, 33}}) {
    const Tensor base = test::random_tensor(shape, 10, -5.f, 5.f);
    for (const Tensor& x : {base, test::non_contiguous_copy(base)}) {
      for (int dim = 0; dim < shape.size(); ++dim) {
        const std::string what = shape.str() + " dim " + std::to_string(dim);
        expect_close(ops::softmax(x, dim), Ref{shape, ref_softmax(base, dim, false)}, 1e-7, 1e-5,
                     "softmax " + what);
        expect_close(ops::log_softmax(x, dim), Ref{shape, ref_softmax(base, dim, true)}, 1e-6, 1e-6,
                     "log_softmax " + what);
      }
    }
    EXPECT_EQ(test::max_abs_diff(ops::softmax(base, -1), ops::softmax(base, shape.size() - 1)), 0.0);
  }
}

TEST(Softmax, StableForLargeMagnitudes) {
  // exp(1e4) overflows in any float type; subtracting the max first keeps everything finite.
  const Tensor x = test::random_tensor({4, 33}, 11, -1e4f, 1e4f);
  for (int dim : {0, 1}) {
    const Tensor y = ops::softmax(x, dim);
    expect_close(y, Ref{x.shape(), ref_softmax(x, dim, false)}, 1e-7, 1e-5, "softmax 1e4");
    expect_close(ops::sum(y, {dim}), Ref{dim == 0 ? Shape{33} : Shape{4}, Values(dim == 0 ? 33 : 4, 1.0)},
                 1e-6, 0, "softmax rows sum to 1");
    expect_close(ops::log_softmax(x, dim), Ref{x.shape(), ref_softmax(x, dim, true)}, 1e-6, 1e-6,
                 "log_softmax 1e4");
  }
  const Tensor same = Tensor::full({3}, 1e4);
  expect_close(ops::softmax(same, 0), Ref{Shape{3}, Values(3, 1.0 / 3)}, 1e-7, 0, "equal large values");
}

TEST(Softmax, EdgeCasesAndErrors) {
  EXPECT_EQ(ops::softmax(Tensor::full({}, 7.0), 0).item(), 1.0);
  EXPECT_EQ(ops::log_softmax(Tensor::full({}, 7.0), -1).item(), 0.0);
  EXPECT_EQ(ops::softmax(Tensor::zeros({3, 0}), 1).shape(), Shape({3, 0}));
  expect_error_mentions([] { ops::softmax(Tensor::zeros({2, 3}), 2); }, "softmax");
  expect_error_mentions([] { ops::log_softmax(Tensor::zeros({2, 3}), -3); }, "log_softmax");
  expect_error_mentions([] { ops::softmax(Tensor::zeros({2, 3}, DType::F16), 1); }, "f32");
  EXPECT_THROW(ops::softmax(Tensor(), 0), Error);
}

}  // namespace
}  // namespace ltx::reduce_test
