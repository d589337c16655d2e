// FastDivU32 (backend/cuda/fast_div.cuh): the CUDA kernels' index divisions by a multiply-high.
// Header-only host arithmetic, so it is checked here on every build, CUDA or not.
#include "backend/cuda/fast_div.cuh"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace ltx {
namespace {

TEST(FastDivU32, QuotientsEqualIntegerDivisionBelowTwoToThe31) {
  std::vector<uint32_t> divisors = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 48, 96, 100, 106, 121,
                                    255, 256, 257, 384, 1000, 1331, 4096, 65535, 65536, 65537,
                                    (1u << 20) + 3, 1000000007u, (1u << 30) - 1, 1u << 30,
                                    (1u << 31) - 1, 1u << 31};
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + rng() % 5000000u);
  for (const uint32_t d : divisors) {
    const cuda::FastDivU32 f(d);
    std::vector<uint32_t> n = {0, 1, d - 1, d, d + 1, 2 * d - 1, (1u << 31) - 1, (1u << 31) - 2};
    for (int k = 0; k < 2000; ++k) n.push_back(rng() & 0x7FFFFFFFu);
    for (uint32_t m = 1; m < 64; ++m) n.push_back(static_cast<uint32_t>((uint64_t{m} * d - 1) & 0x7FFFFFFFu));
    for (const uint32_t x : n) {
      if (x >= (1u << 31)) continue;
      ASSERT_EQ(f.div_host(x), x / d) << x << " / " << d;
    }
  }
}

TEST(FastDivU32, FitsOnlyIndicesBelowTwoToThe31) {
  EXPECT_TRUE(cuda::fast_div_fits(0));
  EXPECT_TRUE(cuda::fast_div_fits((int64_t{1} << 31) - 1));
  EXPECT_FALSE(cuda::fast_div_fits(int64_t{1} << 31));
  EXPECT_FALSE(cuda::fast_div_fits(-1));
}

}  // namespace
}  // namespace ltx
