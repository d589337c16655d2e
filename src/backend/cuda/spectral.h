#pragma once
// CUDA spectral ops (arguments checked by src/ops/spectral.cpp).
#include <cstdint>

#include "core/tensor.h"

namespace ltx::cuda {

// ops::stft_magnitude: one thread per (row, bin, frame) sums the windowed, reflect-padded frame
// against double twiddles (a direct DFT in double: the audio encoder's STFT is small, ~1 GFLOP
// for a 10 s clip, so an FFT would not pay for itself); x f32 or bf16, the result f32.
Tensor stft_magnitude(const Tensor& x, const Tensor& window, int64_t n_fft, int64_t hop);

}  // namespace ltx::cuda
