// ops::stft_magnitude (the audio encoder's STFT) against a naive double DFT.
#include "ops/spectral.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "io/io_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Naive |DFT| of reflect-padded, windowed frames in double.
std::vector<double> naive_stft(const Tensor& x, const Tensor& window, int64_t n_fft, int64_t hop) {
  const auto xv = x.contiguous().to_double_vector();
  const auto wv = window.to_double_vector();
  const int64_t len = x.size(-1), rows = x.numel() / len, frames = 1 + len / hop,
                nb = n_fft / 2 + 1;
  std::vector<double> out(rows * nb * frames);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < frames; ++t)
      for (int64_t k = 0; k < nb; ++k) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < n_fft; ++j) {
          int64_t i = t * hop + j - n_fft / 2;
          i = i < 0 ? -i : (i >= len ? 2 * (len - 1) - i : i);
          const double v = xv[r * len + i] * wv[j], a = 2 * kPi * double(j * k) / double(n_fft);
          re += v * std::cos(a);
          im -= v * std::sin(a);
        }
        out[(r * nb + k) * frames + t] = std::hypot(re, im);
      }
  return out;
}

TEST(StftMagnitude, MatchesNaiveDftForPowerOfTwoAndOtherSizes) {
  for (int64_t n_fft : {64, 30, 7}) {
    const Tensor x = test::random_tensor({2, 3, 129}, 11 + n_fft);
    const Tensor w = test::random_tensor({n_fft}, 5, 0.f, 1.f);
    const Tensor s = ops::stft_magnitude(test::non_contiguous_copy(x), w, n_fft, 13);
    ASSERT_EQ(s.shape(), Shape({2, 3, n_fft / 2 + 1, 1 + 129 / 13})) << n_fft;
    EXPECT_LE(test::max_rel_err(s, Tensor::from_vector(naive_stft(x, w, n_fft, 13), s.shape())), 1e-6) << n_fft;
  }
}

TEST(StftMagnitude, RejectsSignalsShorterThanTheReflectPaddingAndBadWindows) {
  test::expect_error_containing(
      [] { ops::stft_magnitude(Tensor::zeros({1, 16}), Tensor::full({32}, 0.5), 32, 8); },
      {"stft_magnitude", "16"});
  test::expect_error_containing(
      [] { ops::stft_magnitude(Tensor::zeros({1, 64}), Tensor::full({16}, 0.5), 32, 8); },
      {"window"});
}

}  // namespace
}  // namespace ltx
