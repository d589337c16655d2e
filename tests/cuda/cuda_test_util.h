#pragma once
// Helpers for the CUDA tests: comparisons of a GPU result with the CPU op's (any layouts,
// dtypes and devices; everything is compared on the host).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/attention.h"
#include "core/tensor.h"
#include "support/test_support.h"

// Skips unless device 0 runs the wgmma kernels (an sm_90 GPU and a binary with sm_90a code).
#define LTX_REQUIRE_WGMMA()                                                         \
  do {                                                                              \
    LTX_REQUIRE_CUDA();                                                             \
    if (!::ltx::cuda::wgmma_attention_available(0))                                 \
      GTEST_SKIP() << "the wgmma kernels need an sm_90 GPU and sm_90a code";        \
  } while (0)

namespace ltx::test {

inline const Device kGpu = Device::cuda(0);

// Byte-for-byte equality of two tensors' logical contents (any layout, any device).
inline ::testing::AssertionResult same_bytes(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << got.describe() << " vs " << want.describe();
  const Tensor g = got.to(Device::cpu()).contiguous(), w = want.to(Device::cpu()).contiguous();
  const size_t es = g.element_size();
  const auto* gp = static_cast<const unsigned char*>(g.raw_data());
  const auto* wp = static_cast<const unsigned char*>(w.raw_data());
  for (int64_t i = 0; i < g.numel(); ++i) {
    if (std::memcmp(gp + i * es, wp + i * es, es) != 0) {
      uint64_t a = 0, b = 0;
      std::memcpy(&a, gp + i * es, es);
      std::memcpy(&b, wp + i * es, es);
      return ::testing::AssertionFailure()
             << dtype_name(g.dtype()) << " element " << i << ": got bits 0x" << std::hex << a
             << ", want 0x" << b;
    }
  }
  return ::testing::AssertionSuccess();
}

// The same values as the GPU tensor t, one element into a larger buffer: contiguous but not
// 16-byte aligned, so the row kernels take their general (scalar) path.
inline Tensor misaligned_copy(const Tensor& t) {
  const Tensor buf = Tensor::empty({t.numel() + 1}, t.dtype(), t.device());
  const Tensor view = buf.narrow(0, 1, t.numel()).view(t.shape());
  view.copy_from(t);
  return view;
}

// ||got - want|| / ||want|| over all elements (compared as doubles on the host; any layouts,
// dtypes and devices).
inline double rel_l2(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = got.to_double_vector(), w = want.to_double_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    num += (g[i] - w[i]) * (g[i] - w[i]);
    den += w[i] * w[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Same shape and every element within atol + rtol * |want| (NaN matches NaN, inf matches an
// equal inf). Dtypes may differ (compared as doubles).
inline ::testing::AssertionResult near(const Tensor& got, const Tensor& want, double atol,
                                       double rtol) {
  if (got.shape() != want.shape())
    return ::testing::AssertionFailure() << got.describe() << " vs " << want.describe();
  const std::vector<double> g = got.to_double_vector(), w = want.to_double_vector();
  int bad = 0;
  std::string first;
  double worst = 0, diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isfinite(g[i]) && std::isfinite(w[i])) {
      diff2 += (g[i] - w[i]) * (g[i] - w[i]);
      ref2 += w[i] * w[i];
    }
    const bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                    std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]);
    if (ok) continue;
    if (bad++ == 0)
      first = "element " + std::to_string(i) + ": got " + std::to_string(g[i]) + ", want " +
              std::to_string(w[i]);
    worst = std::max(worst, std::fabs(g[i] - w[i]));
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << g.size() << " elements of " << got.describe() << " differ from "
         << want.describe() << " (" << first << "; worst |diff| " << worst << ", rel L2 "
         << (ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2)) << ", atol " << atol
         << ", rtol " << rtol << ")";
}

}  // namespace ltx::test
