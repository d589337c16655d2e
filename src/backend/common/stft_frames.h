#pragma once
// What the CPU and CUDA STFTs (backend/cpu/spectral.cpp, backend/cuda/spectral.cu) share: the
// reflect-padded frame indexing of torch.stft(center=True, pad_mode="reflect") and the DFT
// twiddle table.
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype_bits.h"

namespace ltx::stft {

// The sample behind index i of the signal reflect-padded on both sides (|i| < length, i.e. the
// padding is shorter than the signal, which ops::stft_magnitude checks).
LTX_HOST_DEVICE inline int64_t reflect_index(int64_t i, int64_t length) {
  if (i < 0) i = -i;
  if (i >= length) i = 2 * (length - 1) - i;
  return i;
}

// cos / sin(2 pi m / n) for m < n, in double.
struct Twiddles {
  std::vector<double> cos, sin;
  explicit Twiddles(int64_t n) : cos(static_cast<size_t>(n)), sin(static_cast<size_t>(n)) {
    constexpr double kPi = 3.14159265358979323846;
    for (int64_t m = 0; m < n; ++m) {
      const double a = 2.0 * kPi * static_cast<double>(m) / static_cast<double>(n);
      cos[static_cast<size_t>(m)] = std::cos(a);
      sin[static_cast<size_t>(m)] = std::sin(a);
    }
  }
};

}  // namespace ltx::stft
