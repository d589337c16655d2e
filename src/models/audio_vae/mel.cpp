#include "models/audio_vae/mel.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/shape.h"
#include "ops/spectral.h"

namespace ltx::models::audio_vae {

namespace {

constexpr double kPi = 3.14159265358979323846;

// sin / cos of a float32 argument, rounded to float32 (torch's float kernels are within an ulp).
float sinf32(float x) { return static_cast<float>(std::sin(static_cast<double>(x))); }
float cosf32(float x) { return static_cast<float>(std::cos(static_cast<double>(x))); }

// torchaudio's slaney mel scale (functional._hz_to_mel / _mel_to_hz).
constexpr double kFsp = 200.0 / 3.0;
constexpr double kMinLogHz = 1000.0;
double min_log_mel() { return kMinLogHz / kFsp; }
double logstep() { return std::log(6.4) / 27.0; }

double hz_to_mel_slaney(double f) {
  if (f >= kMinLogHz) return min_log_mel() + std::log(f / kMinLogHz) / logstep();
  return f / kFsp;
}
double mel_to_hz_slaney(double m) {
  if (m >= min_log_mel()) return kMinLogHz * std::exp(logstep() * (m - min_log_mel()));
  return kFsp * m;
}

// torch.linspace(start, end, steps) in double: the first half from `start`, the rest from `end`.
std::vector<double> linspace(double start, double end, int64_t steps) {
  std::vector<double> v(static_cast<size_t>(steps));
  if (steps == 1) {
    v[0] = start;
    return v;
  }
  const double step = (end - start) / static_cast<double>(steps - 1);
  for (int64_t i = 0; i < steps; ++i)
    v[i] = i < steps / 2 ? start + step * static_cast<double>(i)
                         : end - step * static_cast<double>(steps - i - 1);
  return v;
}

}  // namespace

Tensor hann_window(int64_t n) {
  LTX_CHECK(n >= 1, "hann_window: length must be >= 1, got ", n);
  if (n == 1) return Tensor::full({1}, 1.0);
  // torch: arange(n + 1) * (2 pi / n), cos, * -0.5, + 0.5, first n entries; all in float.
  const float f = static_cast<float>(2.0 * kPi / static_cast<double>(n));
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) w[k] = cosf32(static_cast<float>(k) * f) * -0.5f + 0.5f;
  return Tensor::from_vector(w, {n});
}

Tensor melscale_fbanks_slaney(int64_t n_freqs, double f_min, double f_max, int64_t n_mels,
                              int64_t sample_rate) {
  LTX_CHECK(n_freqs >= 2 && n_mels >= 1, "melscale_fbanks: need n_freqs >= 2 and n_mels >= 1, got ",
            n_freqs, " and ", n_mels);
  const std::vector<double> all_freqs =
      linspace(0.0, static_cast<double>(sample_rate / 2), n_freqs);
  const std::vector<double> m_pts =
      linspace(hz_to_mel_slaney(f_min), hz_to_mel_slaney(f_max), n_mels + 2);
  std::vector<double> f_pts(m_pts.size());
  for (size_t i = 0; i < m_pts.size(); ++i) f_pts[i] = mel_to_hz_slaney(m_pts[i]);
  std::vector<float> fb(static_cast<size_t>(n_freqs * n_mels));
  for (int64_t i = 0; i < n_freqs; ++i) {
    for (int64_t j = 0; j < n_mels; ++j) {
      const double down = -(f_pts[j] - all_freqs[i]) / (f_pts[j + 1] - f_pts[j]);
      const double up = (f_pts[j + 2] - all_freqs[i]) / (f_pts[j + 2] - f_pts[j + 1]);
      const double tri = std::max(0.0, std::min(down, up));
      const double enorm = 2.0 / (f_pts[j + 2] - f_pts[j]);  // slaney area normalisation
      fb[i * n_mels + j] = static_cast<float>(tri * enorm);
    }
  }
  return Tensor::from_vector(fb, {n_freqs, n_mels});
}

Tensor resample_kernel(int64_t orig_freq, int64_t new_freq, int64_t* width_out) {
  LTX_CHECK(orig_freq > 0 && new_freq > 0, "resample: rates must be positive, got ", orig_freq,
            " and ", new_freq);
  constexpr int64_t kWidth = 6;      // lowpass_filter_width
  constexpr double kRolloff = 0.99;  // rolloff
  const int64_t g = std::gcd(orig_freq, new_freq);
  const int64_t orig = orig_freq / g, nw = new_freq / g;
  const double base = static_cast<double>(std::min(orig, nw)) * kRolloff;
  const int64_t width =
      static_cast<int64_t>(std::ceil(static_cast<double>(kWidth * orig) / base));
  const int64_t k = 2 * width + orig;
  // The float32 steps of torchaudio's _get_sinc_resample_kernel for a float32 waveform.
  const float fbase = static_cast<float>(base), fpi = static_cast<float>(kPi);
  const float fscale = static_cast<float>(base / static_cast<double>(orig));
  std::vector<float> kernel(static_cast<size_t>(nw * k));
  for (int64_t j = 0; j < nw; ++j) {
    const float tj = static_cast<float>(-j) / static_cast<float>(nw);
    for (int64_t i = 0; i < k; ++i) {
      const float idx = static_cast<float>(i - width) / static_cast<float>(orig);
      float t = (tj + idx) * fbase;
      t = std::min(std::max(t, -static_cast<float>(kWidth)), static_cast<float>(kWidth));
      const float c = cosf32(t * fpi / static_cast<float>(kWidth) / 2.0f);
      const float window = c * c;
      t *= fpi;
      const float s = t == 0.0f ? 1.0f : sinf32(t) / t;
      kernel[j * k + i] = s * (window * fscale);
    }
  }
  *width_out = width;
  return Tensor::from_vector(kernel, {nw, 1, k});
}

Tensor resample(const Tensor& waveform, int64_t orig_freq, int64_t new_freq) {
  LTX_CHECK(waveform.dim() >= 1, "resample: the waveform needs a time axis, got ",
            waveform.describe());
  if (orig_freq == new_freq) return waveform;
  int64_t width = 0;
  const Tensor kernel = resample_kernel(orig_freq, new_freq, &width);
  const int64_t g = std::gcd(orig_freq, new_freq);
  const int64_t orig = orig_freq / g, nw = new_freq / g;
  const int64_t length = waveform.size(-1);
  const int64_t rows = length == 0 ? 0 : waveform.numel() / length;
  Tensor x = waveform.contiguous().reshape({rows, 1, length});
  x = ops::pad(x, {width, width + orig});
  Tensor y = ops::conv1d(x, kernel, {}, {orig});  // [rows, nw, frames]: one phase per channel
  y = y.transpose(1, 2).reshape({rows, -1});
  const int64_t target = (nw * length + orig - 1) / orig;  // ceil(new * L / orig)
  y = y.narrow(1, 0, target).contiguous();
  std::vector<int64_t> shape = waveform.shape().vec();
  shape.back() = target;
  return y.reshape(Shape(shape));
}

AudioProcessor::AudioProcessor(int64_t target_sample_rate, int64_t mel_bins,
                               int64_t mel_hop_length, int64_t n_fft)
    : rate_(target_sample_rate), mel_bins_(mel_bins), hop_(mel_hop_length), n_fft_(n_fft) {
  LTX_CHECK(rate_ > 0 && mel_bins_ > 0 && hop_ > 0 && n_fft_ > 1,
            "AudioProcessor: rate, mel bins, hop and n_fft must be positive, got ", rate_, ", ",
            mel_bins_, ", ", hop_, ", ", n_fft_);
  window_ = hann_window(n_fft_);
  fb_ = melscale_fbanks_slaney(n_fft_ / 2 + 1, 0.0, static_cast<double>(rate_) / 2.0, mel_bins_,
                               rate_);
}

Audio AudioProcessor::resample_audio(const Audio& audio) const {
  if (audio.sampling_rate == rate_) return audio;
  return {resample(audio.waveform, audio.sampling_rate, rate_), rate_};
}

Tensor AudioProcessor::waveform_to_mel(const Audio& audio, const Probe& probe) const {
  LTX_CHECK(audio.waveform.defined() && audio.waveform.dim() >= 1,
            "waveform_to_mel: needs a waveform [..., samples]");
  LTX_CHECK(audio.sampling_rate > 0, "waveform_to_mel: the sampling rate must be positive, got ",
            audio.sampling_rate);
  const Tensor wave = audio.waveform.to(DType::F32);
  const Audio resampled = resample_audio({wave, audio.sampling_rate});
  if (audio.sampling_rate != rate_) observe(probe, "resampled", resampled.waveform);
  const Tensor spec = ops::stft_magnitude(resampled.waveform, window_, n_fft_, hop_);
  observe(probe, "spec_magnitude", spec);
  // MelScale: (spec^T @ fb)^T -> [..., mel_bins, frames]
  const Tensor mel = ops::matmul(spec.transpose(-1, -2), fb_).transpose(-1, -2).contiguous();
  observe(probe, "mel_linear", mel);
  return ops::log(ops::clamp(mel, 1e-5, INFINITY)).transpose(-1, -2).contiguous();
}

}  // namespace ltx::models::audio_vae
