#pragma once
// Helpers shared by the video VAE / upsampler fixture tests: reference io files, error measures
// printed the way `ltx parity` does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "io/safetensors.h"
#include "support/test_support.h"

namespace ltx::test {

struct RefErrors {
  double rel_l2 = 0;   // ||x - ref|| / ||ref||: the measure
  double max_rel = 0;  // max|x - ref| / max|ref|: the golden README's measure
};

inline RefErrors ref_errors(const Tensor& x, const Tensor& ref) {
  const auto a = x.to_double_vector(), b = ref.to_double_vector();
  double d2 = 0, r2 = 0, dmax = 0, rmax = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = a[i] - b[i];
    d2 += d * d;
    r2 += b[i] * b[i];
    dmax = std::max(dmax, std::isnan(d) ? INFINITY : std::fabs(d));
    rmax = std::max(rmax, std::fabs(b[i]));
  }
  return {r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2), rmax > 0 ? dmax / rmax : dmax};
}

// Checks rel_l2 <= tol (the bar) and max_rel <= max_rel_tol, printing both.
inline void expect_matches(const std::string& name, const Tensor& x, const Tensor& ref, double tol,
                           double max_rel_tol) {
  ASSERT_EQ(x.shape(), ref.shape()) << name << ": " << x.describe() << " vs " << ref.describe();
  const RefErrors e = ref_errors(x, ref);
  std::printf("    %-34s rel_l2 %.2e  max_rel %.2e  (rel_l2 tol %.0e)\n", name.c_str(), e.rel_l2,
              e.max_rel, tol);
  EXPECT_LE(e.rel_l2, tol) << name;
  EXPECT_LE(e.max_rel, max_rel_tol) << name;
}

inline std::shared_ptr<const io::SafetensorsFile> open_fixture(const std::string& name) {
  return io::SafetensorsFile::open(fixture(name));
}

inline Tensor io_tensor(const io::SafetensorsFile& f, const std::string& name) {
  return f.tensor(name).to(DType::F32).contiguous();
}

}  // namespace ltx::test
