#pragma once
// Waveform -> log-mel for audio conditioning (reference: model/audio_vae/ops.py AudioProcessor,
// which uses torchaudio): resampling to the model rate with torchaudio.functional.resample's
// windowed-sinc kernel, a centred STFT magnitude (torch.stft, reflect padding, periodic Hann
// window), torchaudio's slaney mel filterbank and log(clamp(., 1e-5)).
//
// The STFT is ops::stft_magnitude (double-precision sums, exact to ~1e-15 relative; the reference
// runs a float32 FFT), the constants the reference computes in float32 (window, resampling
// kernel) are computed with the same float32 steps, and the mel filterbank in double.
#include <cstdint>

#include "core/tensor.h"
#include "models/audio_vae/probe.h"

namespace ltx::models::audio_vae {

// A waveform [..., samples] and its rate (the reference's ltx_core.types.Audio).
struct Audio {
  Tensor waveform;
  int64_t sampling_rate = 0;
};

// torch.hann_window(n, periodic=True) as float32: 0.5 - 0.5 cos(2 pi k / n), in torch's float
// steps.
Tensor hann_window(int64_t n);

// torchaudio.functional.melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate,
// norm="slaney", mel_scale="slaney") -> [n_freqs, n_mels] (computed in double, stored f32).
Tensor melscale_fbanks_slaney(int64_t n_freqs, double f_min, double f_max, int64_t n_mels,
                              int64_t sample_rate);

// The kernel of torchaudio.functional.resample(orig -> new) with its defaults
// (sinc_interp_hann, lowpass_filter_width 6, rolloff 0.99), built in float32 as torchaudio does
// for a float32 waveform: [new / g, 1, 2 * width + orig / g] with g = gcd(orig, new).
// `*width` receives the half width.
Tensor resample_kernel(int64_t orig_freq, int64_t new_freq, int64_t* width);

// torchaudio.functional.resample(waveform, orig_freq, new_freq) for a float32 waveform
// [..., L] -> [..., ceil(L * new / orig)]; returns the input when the rates are equal.
Tensor resample(const Tensor& waveform, int64_t orig_freq, int64_t new_freq);

// The reference's AudioProcessor(target_sample_rate, mel_bins, mel_hop_length, n_fft):
// MelSpectrogram(n_fft, win_length = n_fft, hop, f_min 0, f_max = rate / 2, n_mels, Hann,
// center, reflect, power 1, slaney scale and norm).
class AudioProcessor {
 public:
  AudioProcessor(int64_t target_sample_rate, int64_t mel_bins, int64_t mel_hop_length,
                 int64_t n_fft);

  // Resampled to the target rate when the rate differs (float32 in, float32 out).
  Audio resample_audio(const Audio& audio) const;
  // [B, C, samples] (any leading dims) at any rate -> log-mel [..., frames, mel_bins] with
  // frames = 1 + N / hop for N samples at the target rate. Probes: "resampled" (when
  // resampling), "spec_magnitude" [..., n_fft/2+1, frames], "mel_linear" [..., mel_bins, frames].
  Tensor waveform_to_mel(const Audio& audio, const Probe& probe = {}) const;

  int64_t target_sample_rate() const { return rate_; }
  int64_t mel_bins() const { return mel_bins_; }
  int64_t hop_length() const { return hop_; }
  int64_t n_fft() const { return n_fft_; }
  const Tensor& window() const { return window_; }        // [n_fft]
  const Tensor& filterbank() const { return fb_; }         // [n_fft / 2 + 1, mel_bins]

 private:
  int64_t rate_, mel_bins_, hop_, n_fft_;
  Tensor window_, fb_;
};

}  // namespace ltx::models::audio_vae
