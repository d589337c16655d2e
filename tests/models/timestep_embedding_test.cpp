#include <gtest/gtest.h>

#include <cmath>
#include <vector>

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

// The frequency ladder is a cached device constant keyed by its inputs: periods that agree to six
// digits (10000 and 10000.04) must still get their own ladders.
TEST(TimestepSinusoid, PeriodsThatDifferPastSixDigitsGetTheirOwnLadder) {
  const Tensor t = Tensor::from_vector(std::vector<float>{999.f}, {1});
  const auto at = [&](double period) {
    return models::transformer::timestep_sinusoid(t, 16, false, 0.0, 1.0, period)
        .to_double_vector();
  };
  const std::vector<double> a = at(10000.0), b = at(10000.04);
  const double f = std::exp(-std::log(10000.04) * 7 / 8.0);
  EXPECT_NE(a, b);
  EXPECT_NEAR(b[7], std::sin(999.0 * f), 2e-4);
  EXPECT_EQ(at(10000.0), a);
}

}  // namespace
}  // namespace ltx
