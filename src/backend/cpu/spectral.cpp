#include "backend/cpu/spectral.h"

#include <cmath>
#include <vector>

#include "backend/common/stft_frames.h"
#include "core/parallel.h"

namespace ltx::cpu {

namespace {

// DFT bins 0 .. n/2 of a real sequence, in double: an iterative radix-2 FFT when n is a power of
// two, a direct sum over a twiddle table otherwise.
class RealDft {
 public:
  explicit RealDft(int64_t n) : n_(n), tw_(n) {
    pow2_ = n > 0 && (n & (n - 1)) == 0;
    if (pow2_) {
      int bits = 0;
      while ((int64_t{1} << bits) < n) ++bits;
      rev_.resize(n);
      for (int64_t i = 0; i < n; ++i) {
        int64_t r = 0;
        for (int b = 0; b < bits; ++b)
          if (i & (int64_t{1} << b)) r |= int64_t{1} << (bits - 1 - b);
        rev_[i] = r;
      }
    }
  }

  // |X_k| for k = 0 .. n/2 of x[0 .. n), X_k = sum_j x_j exp(-2 pi i j k / n). `re` / `im` are
  // scratch buffers of n doubles.
  void magnitude(const double* x, float* mag, double* re, double* im) const {
    const int64_t n = n_, nb = n / 2 + 1;
    if (!pow2_) {
      for (int64_t k = 0; k < nb; ++k) {
        double sr = 0, si = 0;
        int64_t idx = 0;  // (j * k) mod n
        for (int64_t j = 0; j < n; ++j) {
          sr += x[j] * tw_.cos[idx];
          si -= x[j] * tw_.sin[idx];
          idx += k;
          if (idx >= n) idx -= n;
        }
        mag[k] = static_cast<float>(std::sqrt(sr * sr + si * si));
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      re[i] = x[rev_[i]];
      im[i] = 0.0;
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      const int64_t half = len / 2, step = n / len;
      for (int64_t i = 0; i < n; i += len) {
        for (int64_t j = 0; j < half; ++j) {
          const double wr = tw_.cos[j * step], wi = -tw_.sin[j * step];
          const int64_t a = i + j, b = a + half;
          const double vr = re[b] * wr - im[b] * wi, vi = re[b] * wi + im[b] * wr;
          re[b] = re[a] - vr;
          im[b] = im[a] - vi;
          re[a] += vr;
          im[a] += vi;
        }
      }
    }
    for (int64_t k = 0; k < nb; ++k)
      mag[k] = static_cast<float>(std::sqrt(re[k] * re[k] + im[k] * im[k]));
  }

 private:
  int64_t n_;
  stft::Twiddles tw_;
  bool pow2_ = false;
  std::vector<int64_t> rev_;
};

}  // namespace

Tensor stft_magnitude(const Tensor& x, const Tensor& window, int64_t n_fft, int64_t hop) {
  const int64_t length = x.size(-1), half = n_fft / 2;
  const int64_t rows = x.numel() / length, frames = 1 + length / hop, nb = n_fft / 2 + 1;
  const std::vector<float> xv = x.contiguous().to_float_vector();
  const std::vector<float> wv = window.to_float_vector();
  std::vector<float> out(static_cast<size_t>(rows * nb * frames));
  const RealDft dft(n_fft);
  parallel_for(0, rows * frames, 4, [&](int64_t b, int64_t e) {
    std::vector<double> frame(n_fft), re(n_fft), im(n_fft);
    std::vector<float> mag(nb);
    for (int64_t it = b; it < e; ++it) {
      const int64_t r = it / frames, t = it % frames;
      const float* row = xv.data() + r * length;
      for (int64_t j = 0; j < n_fft; ++j) {
        const int64_t idx = stft::reflect_index(t * hop + j - half, length);
        frame[j] = static_cast<double>(row[idx]) * static_cast<double>(wv[j]);
      }
      dft.magnitude(frame.data(), mag.data(), re.data(), im.data());
      float* o = out.data() + r * nb * frames + t;
      for (int64_t k = 0; k < nb; ++k) o[k * frames] = mag[k];
    }
  });
  // [..., length] -> [..., nb, frames]; rebuilt rather than indexed, as g++ 13 cannot see the
  // dispatch's dim >= 1 check and reports back() on a possibly empty vector.
  std::vector<int64_t> shape = x.shape().vec();
  shape.pop_back();
  shape.push_back(nb);
  shape.push_back(frames);
  return Tensor::from_vector(out, Shape(shape));
}

}  // namespace ltx::cpu
