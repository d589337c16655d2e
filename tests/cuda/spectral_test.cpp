// ops::stft_magnitude on CUDA (a direct double DFT per bin) against the CPU op (a double FFT):
// both sum in double, so the f32 results agree to about an ulp.
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_test_util.h"
#include "ops/spectral.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using test::kGpu;
using test::near;

TEST(CudaStft, MagnitudeMatchesTheCpuOp) {
  LTX_REQUIRE_CUDA();
  struct Case {
    Shape x;
    int64_t n_fft, hop;
  };
  // Powers of two (the CPU's FFT), other sizes (its direct sum), the audio encoder's 1024 / 160.
  const Case cases[] = {{{2, 3, 129}, 64, 13}, {{2, 3, 129}, 30, 13}, {{1, 129}, 7, 5}, {{2, 16000}, 1024, 160}};
  uint64_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE("x " + c.x.str() + " n_fft " + std::to_string(c.n_fft) + " hop " + std::to_string(c.hop));
    const Tensor x = test::random_tensor(c.x, seed++);
    const Tensor w = test::random_tensor({c.n_fft}, seed++, 0.f, 1.f);
    const Tensor want = ops::stft_magnitude(x, w, c.n_fft, c.hop);
    const Tensor got = ops::stft_magnitude(test::non_contiguous_copy(x).to(kGpu), w.to(kGpu), c.n_fft, c.hop);
    EXPECT_EQ(got.device(), kGpu);
    EXPECT_EQ(got.dtype(), DType::F32);
    // Double sums in another order, rounded to f32: an ulp, plus the double error of near-zero bins.
    EXPECT_TRUE(near(got, want, 1e-9, 2.5e-7));
    // bf16 samples are widened exactly.
    const Tensor xb = x.to(DType::BF16);
    EXPECT_TRUE(near(ops::stft_magnitude(xb.to(kGpu), w.to(kGpu), c.n_fft, c.hop),
                     ops::stft_magnitude(xb.to(DType::F32), w, c.n_fft, c.hop), 1e-9, 2.5e-7));
  }
}

}  // namespace
}  // namespace ltx
