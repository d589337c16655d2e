#pragma once
// CPU spectral ops (arguments checked by src/ops/spectral.cpp).
#include <cstdint>

#include "core/tensor.h"

namespace ltx::cpu {

// ops::stft_magnitude with a double-precision real DFT per frame (radix-2 FFT when n_fft is a
// power of two, a direct sum otherwise).
Tensor stft_magnitude(const Tensor& x, const Tensor& window, int64_t n_fft, int64_t hop);

}  // namespace ltx::cpu
