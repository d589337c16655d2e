#include "backend/cuda/spectral.h"

#include "backend/cuda/device.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/stream.h"
#include "backend/common/stft_frames.h"

namespace ltx::cuda {

namespace {

struct StftArgs {
  const float* x;       // [rows, length]
  const float* window;  // [n_fft]
  const double* cos_t;  // cos(2 pi m / n_fft), m < n_fft
  const double* sin_t;
  float* out;  // [rows, nb, frames]
  int64_t rows, length, frames, n_fft, nb, hop;
};

// Output i = (row, bin k, frame t), frames fastest: a warp shares k (so its twiddle loads are
// broadcasts) and reads neighbouring hops of one row.
__global__ void stft_magnitude_kernel(StftArgs a) {
  const int64_t total = a.rows * a.nb * a.frames;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t t = i % a.frames, k = (i / a.frames) % a.nb, r = i / (a.frames * a.nb);
    const float* row = a.x + r * a.length;
    const int64_t start = t * a.hop - a.n_fft / 2;  // the frame's first sample in the padded signal
    double re = 0, im = 0;
    int64_t m = 0;  // (j k) mod n_fft
    for (int64_t j = 0; j < a.n_fft; ++j) {
      const int64_t idx = stft::reflect_index(start + j, a.length);
      const double v = static_cast<double>(row[idx]) * static_cast<double>(a.window[j]);  // exact
      re += v * a.cos_t[m];
      im -= v * a.sin_t[m];
      m += k;
      if (m >= a.n_fft) m -= a.n_fft;
    }
    a.out[i] = static_cast<float>(sqrt(re * re + im * im));
  }
}

}  // namespace

Tensor stft_magnitude(const Tensor& x, const Tensor& window, int64_t n_fft, int64_t hop) {
  const Device device = x.device();
  const int64_t length = x.size(-1), rows = x.numel() / length, frames = 1 + length / hop, nb = n_fft / 2 + 1;
  const Tensor xs = x.to(DType::F32).contiguous();  // exact for bf16 samples
  const Tensor w = window.to(DType::F32).contiguous();
  // The CPU's twiddles, uploaded once per call (the op runs once per clip).
  const stft::Twiddles tw(n_fft);
  const Tensor ct = Tensor::from_vector(tw.cos, {n_fft}).to(device), st = Tensor::from_vector(tw.sin, {n_fft}).to(device);
  // [..., length] -> [..., nb, frames]; rebuilt rather than indexed, as g++ 13 cannot see the
  // dispatch's dim >= 1 check and reports back() on a possibly empty vector.
  std::vector<int64_t> shape = x.shape().vec();
  shape.pop_back();
  shape.push_back(nb);
  shape.push_back(frames);
  Tensor out = Tensor::empty(Shape(shape), DType::F32, device);
  if (out.numel() == 0) return out;
  const StftArgs a{xs.data<float>(), w.data<float>(), ct.data<double>(), st.data<double>(), out.data<float>(),
                   rows, length, frames, n_fft, nb, hop};
  DeviceGuard guard(device.index);
  constexpr int kThreads = 256;
  stft_magnitude_kernel<<<grid_for(out.numel(), kThreads, device.index), kThreads, 0,
                          current_stream(device.index).handle()>>>(a);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace ltx::cuda
