#include <gtest/gtest.h>

#include <cmath>

#include "models/transformer/timestep_embedding.h"

namespace ltx {
namespace {

TEST(TimestepSinusoid, MatchesDoubleFormulaWithFlipAndShift) {
  const std::vector<float> ts = {0.f, 1.f, 250.5f, 999.f};
  for (bool flip : {false, true}) {
    for (double shift : {0.0, 1.0}) {
      const int64_t dim = 9;  // odd: one zero pad column
      Tensor e = models::transformer::timestep_sinusoid(Tensor::from_vector(ts, {4}), dim, flip,
                                                        shift);
      ASSERT_EQ(e.shape(), Shape({4, dim}));
      const auto v = e.to_double_vector();
      const int64_t half = dim / 2;
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t j = 0; j < half; ++j) {
          const double f = std::exp(-std::log(10000.0) * j / (half - shift));
          const double s = std::sin(ts[i] * f), c = std::cos(ts[i] * f);
          EXPECT_NEAR(v[i * dim + j], flip ? c : s, 2e-4) << i << "," << j;
          EXPECT_NEAR(v[i * dim + half + j], flip ? s : c, 2e-4) << i << "," << j;
        }
        EXPECT_EQ(v[i * dim + dim - 1], 0.0);
      }
    }
  }
  EXPECT_THROW(models::transformer::timestep_sinusoid(Tensor::zeros({2, 2}), 8, true, 0), Error);
}

}  // namespace
}  // namespace ltx
