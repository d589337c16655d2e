#pragma once
// Shared helpers for the test suites: seeded random tensors, non-contiguous variants, comparisons.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ltx::test {

// Deterministic uniform values in [lo, hi) (f32 CPU tensor).
Tensor random_tensor(const Shape& shape, uint64_t seed, float lo = -1.f, float hi = 1.f);
// Same values as `t` but laid out non-contiguously: stored transposed in a padded buffer and
// viewed back, so strides differ from row-major while the logical contents are identical.
Tensor non_contiguous_copy(const Tensor& t);
// Max |a - b| over all elements (any dtypes/devices; compared in f64).
double max_abs_diff(const Tensor& a, const Tensor& b);
// max|a-b| / max|b| (the golden README's relative error measure); 0 when both are all zero.
double max_rel_err(const Tensor& a, const Tensor& b);
// Path inside tests/fixtures.
std::string fixture(const std::string& name);
// Path of the built `ltx` executable.
std::string ltx_binary();
// True when a CUDA device is usable in this process (compiled in and present).
bool cuda_available();

}  // namespace ltx::test

// Skips the current test unless a CUDA GPU is present.
#define LTX_REQUIRE_CUDA()                                                   \
  do {                                                                       \
    if (!::ltx::test::cuda_available()) GTEST_SKIP() << "no CUDA device";    \
  } while (0)

#define EXPECT_ALLCLOSE(a, b, tol)                                                  \
  do {                                                                              \
    ASSERT_EQ((a).shape(), (b).shape()) << (a).describe() << " vs " << (b).describe(); \
    EXPECT_LE(::ltx::test::max_abs_diff((a), (b)), (tol));                          \
  } while (0)
