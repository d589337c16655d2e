#pragma once
// Spectral ops: the STFT magnitude of the audio encoder's preprocessing (AudioProcessor, the
// reference's torch.stft), on the input's device.
#include <cstdint>

#include "core/tensor.h"

namespace ltx::ops {

// |torch.stft(x, n_fft, hop, window=window (length n_fft), center=True, pad_mode="reflect",
// onesided=True)| for x [..., L] (L > n_fft / 2; f32, or bf16 on CUDA) -> f32
// [..., n_fft / 2 + 1, 1 + L / hop] on x's device. The sums are double precision (the reference
// runs a float32 FFT): the CPU uses a radix-2 FFT (a direct sum for other sizes), CUDA a direct sum
// per bin, so the two agree to the f32 rounding of a double result (about an ulp).
Tensor stft_magnitude(const Tensor& x, const Tensor& window, int64_t n_fft, int64_t hop);

}  // namespace ltx::ops
