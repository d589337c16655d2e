// Waveform -> mel pieces (models/audio_vae/mel.h) against naive double references and the
// reference's stored constants (tests/fixtures/audio_ltx2.io.safetensors: inter.mel.*).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/audio_vae/mel.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace av = models::audio_vae;
constexpr double kPi = 3.14159265358979323846;

double rel_l2(const Tensor& x, const std::vector<double>& ref) {
  const auto v = x.to_double_vector();
  double d = 0, r = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    d += (v[i] - ref[i]) * (v[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return std::sqrt(d / r);
}

TEST(AudioMel, HannWindowIsPeriodicAndMatchesTorch) {
  const io::SafetensorsFile io(test::fixture("audio_ltx2.io.safetensors"));
  const Tensor w = av::hann_window(1024);
  EXPECT_LE(test::max_abs_diff(w, io.tensor("inter.mel.window")), 6e-8);
  for (int64_t n : {1, 7, 64}) {
    const auto v = av::hann_window(n).to_double_vector();
    ASSERT_EQ(static_cast<int64_t>(v.size()), n);
    for (int64_t k = 0; k < n; ++k)
      EXPECT_NEAR(v[k], n == 1 ? 1.0 : 0.5 - 0.5 * std::cos(2 * kPi * k / n), 4e-7) << n << " " << k;
  }
}

TEST(AudioMel, SlaneyFilterbankMatchesTorchaudio) {
  const io::SafetensorsFile io(test::fixture("audio_ltx2.io.safetensors"));
  const Tensor fb = av::melscale_fbanks_slaney(513, 0.0, 8000.0, 64, 16000);
  EXPECT_LE(test::max_abs_diff(fb, io.tensor("inter.mel.fb")), 1e-7);
}

TEST(AudioMel, SlaneyFilterbankMatchesDoubleFormulaAtOtherSizes) {
  const int64_t nf = 257, nm = 40, sr = 22050;
  const double fmax = 11025.0;
  const Tensor fb = av::melscale_fbanks_slaney(nf, 0.0, fmax, nm, sr);
  ASSERT_EQ(fb.shape(), Shape({nf, nm}));
  // librosa-style slaney mel: linear below 1 kHz (200/3 Hz per mel), log above (27 mels / ln 6.4).
  auto to_mel = [](double f) {
    return f < 1000 ? f * 3 / 200 : 15 + std::log(f / 1000) * 27 / std::log(6.4);
  };
  auto to_hz = [](double m) {
    return m < 15 ? m * 200 / 3 : 1000 * std::exp((m - 15) * std::log(6.4) / 27);
  };
  std::vector<double> pts(nm + 2), ref(nf * nm);
  for (int64_t i = 0; i < nm + 2; ++i) pts[i] = to_hz(to_mel(fmax) * i / (nm + 1));
  for (int64_t k = 0; k < nf; ++k) {
    const double f = (sr / 2) * double(k) / (nf - 1);
    for (int64_t j = 0; j < nm; ++j) {
      const double rise = (f - pts[j]) / (pts[j + 1] - pts[j]);
      const double fall = (pts[j + 2] - f) / (pts[j + 2] - pts[j + 1]);
      ref[k * nm + j] = std::max(0.0, std::min(rise, fall)) * 2 / (pts[j + 2] - pts[j]);
    }
  }
  EXPECT_LE(rel_l2(fb, ref), 1e-6);
}

// torchaudio's resampling as a direct double sum: y[j] = sum_i x[i] k(j / new - i / orig) with the
// Hann-windowed sinc of width 6 zero crossings at 0.99 x the lower Nyquist rate.
std::vector<double> naive_resample(const Tensor& x, int64_t orig, int64_t nw) {
  const int64_t g = std::gcd(orig, nw);
  orig /= g;
  nw /= g;
  const double base = std::min(orig, nw) * 0.99;
  const auto xv = x.contiguous().to_double_vector();
  const int64_t len = x.size(-1), rows = x.numel() / len, out_len = (nw * len + orig - 1) / orig;
  const int64_t width = static_cast<int64_t>(std::ceil(6.0 * orig / base));
  std::vector<double> y(rows * out_len);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out_len; ++j) {
      const int64_t blk = j / nw, ph = j % nw;
      double acc = 0;
      for (int64_t i = -width; i < width + orig; ++i) {
        const int64_t src = blk * orig + i;
        if (src < 0 || src >= len) continue;
        double t = (-double(ph) / nw + double(i) / orig) * base;
        t = std::clamp(t, -6.0, 6.0);
        const double win = std::pow(std::cos(t * kPi / 12), 2);
        const double s = t == 0 ? 1.0 : std::sin(kPi * t) / (kPi * t);
        acc += xv[r * len + src] * s * win * base / orig;
      }
      y[r * out_len + j] = acc;
    }
  return y;
}

TEST(AudioMel, ResampleMatchesTheDirectSincSum) {
  const Tensor x = test::random_tensor({2, 2, 101}, 3);
  for (auto [orig, nw] : std::vector<std::pair<int64_t, int64_t>>{
           {5, 3}, {3, 5}, {48000, 16000}, {44100, 16000}, {16000, 24000}}) {
    const Tensor y = av::resample(x, orig, nw);
    const int64_t g = std::gcd(orig, nw);
    const int64_t expect_len = ((nw / g) * 101 + orig / g - 1) / (orig / g);
    ASSERT_EQ(y.shape(), Shape({2, 2, expect_len})) << orig << "->" << nw;
    EXPECT_LE(rel_l2(y, naive_resample(x, orig, nw)), 5e-6) << orig << "->" << nw;
  }
  EXPECT_EQ(av::resample(x, 16000, 16000).storage(), x.storage());
}

TEST(AudioMel, ResampleKeepsABandLimitedToneInPlace) {
  // A 440 Hz tone at 48 kHz resampled to 16 kHz is the same tone at 16 kHz (away from the ends).
  const int64_t n = 4800;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = float(std::sin(2 * kPi * 440.0 * i / 48000.0));
  const auto y = av::resample(Tensor::from_vector(v, {n}), 48000, 16000).to_double_vector();
  ASSERT_EQ(y.size(), 1600u);
  for (int64_t j = 100; j < 1500; ++j)
    EXPECT_NEAR(y[j], std::sin(2 * kPi * 440.0 * j / 16000.0), 2e-3) << j;
}

TEST(AudioMel, ProcessorGivesOneFramePerHopPlusOne) {
  const av::AudioProcessor proc(16000, 64, 160, 1024);
  EXPECT_EQ(proc.filterbank().shape(), Shape({513, 64}));
  const Tensor stereo = test::random_tensor({1, 2, 3200}, 9, -0.5f, 0.5f);
  EXPECT_EQ(proc.waveform_to_mel({stereo, 16000}).shape(), Shape({1, 2, 21, 64}));
  // 0.2 s at 44.1 kHz resamples to 3200 samples: the same frame count.
  const Tensor mono = test::random_tensor({1, 8820}, 10, -0.5f, 0.5f);
  EXPECT_EQ(proc.waveform_to_mel({mono, 44100}).shape(), Shape({1, 21, 64}));
  // log(clamp(., 1e-5)): silence is the floor.
  const Tensor silent = proc.waveform_to_mel({Tensor::zeros({2, 1000}), 16000});
  for (double v : silent.to_double_vector()) EXPECT_FLOAT_EQ(v, std::log(1e-5));
}

}  // namespace
}  // namespace ltx
