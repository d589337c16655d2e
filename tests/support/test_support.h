#pragma once
// Shared helpers for the test suites: seeded random tensors, non-contiguous variants, comparisons.
#include <gtest/gtest.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ltx::test {

// Deterministic uniform values in [lo, hi) (f32 CPU tensor).
Tensor random_tensor(const Shape& shape, uint64_t seed, float lo = -1.f, float hi = 1.f);
// The same in f64 with all 53 bits random (an f32 tensor widened would make many products exact).
Tensor random_f64(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0);
// Same values as `t` but laid out non-contiguously: stored transposed in a padded buffer and
// viewed back, so strides differ from row-major while the logical contents are identical.
Tensor non_contiguous_copy(const Tensor& t);
// Max |a - b| over all elements (any dtypes/devices; compared in f64).
double max_abs_diff(const Tensor& a, const Tensor& b);
// max|a-b| / max|b| (the golden README's relative error measure); 0 when both are all zero.
double max_rel_err(const Tensor& a, const Tensor& b);
// Same shape, dtype and bytes (any devices; undefined tensors equal each other).
bool same_bits(const Tensor& a, const Tensor& b);
// Path inside tests/fixtures.
std::string fixture(const std::string& name);
// Path of the built `ltx` executable.
std::string ltx_binary();
// True when a CUDA device is usable in this process (compiled in and present).
bool cuda_available();

// The message of the ltx::Error that fn() throws, or "<no ltx::Error thrown>".
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no ltx::Error thrown>";
}

// Row-major multi-index of flat index `i` in `shape`, and back.
std::vector<int64_t> unravel(int64_t i, const Shape& shape);
int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape);

// An f64 CPU tensor of `shape` whose element at each multi-index is fn(index): naive references.
template <typename Fn>
Tensor make_ref(const Shape& shape, Fn fn) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (int64_t i = 0; i < shape.numel(); ++i) v[i] = fn(unravel(i, shape));
  return Tensor::from_vector(v, shape);
}

}  // namespace ltx::test

// Skips the current test unless a CUDA GPU is present.
#define LTX_REQUIRE_CUDA()                                                   \
  do {                                                                       \
    if (!::ltx::test::cuda_available()) GTEST_SKIP() << "no CUDA device";    \
  } while (0)

// Expects `stmt` to throw an ltx::Error whose message contains `text`.
#define EXPECT_ERROR_HAS(stmt, text)                                                        \
  EXPECT_NE(::ltx::test::error_of([&] { (void)(stmt); }).find(text), std::string::npos) \
      << ::ltx::test::error_of([&] { (void)(stmt); })

#define EXPECT_ALLCLOSE(a, b, tol)                                                  \
  do {                                                                              \
    ASSERT_EQ((a).shape(), (b).shape()) << (a).describe() << " vs " << (b).describe(); \
    EXPECT_LE(::ltx::test::max_abs_diff((a), (b)), (tol));                          \
  } while (0)
