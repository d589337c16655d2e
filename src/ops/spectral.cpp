#include "ops/spectral.h"

#include "backend/cpu/spectral.h"
#include "ops/dispatch.h"
#if LTX_WITH_CUDA
#include "backend/cuda/spectral.h"
#endif

namespace ltx::ops {

Tensor stft_magnitude(const Tensor& x, const Tensor& window, int64_t n_fft, int64_t hop) {
  const char* op = "stft_magnitude";
  check_defined(op, {&x, &window});
  LTX_CHECK(x.dim() >= 1 && n_fft >= 1 && hop >= 1, op, ": bad arguments (x ", x.describe(), ", n_fft ", n_fft,
            ", hop ", hop, ")");
  check_float(op, "x", x);
  check_float(op, "window", window);
  LTX_CHECK(window.dim() == 1 && window.size(0) == n_fft, op, ": the window must be [", n_fft, "], got ",
            window.describe());
  const int64_t length = x.size(-1), half = n_fft / 2;
  LTX_CHECK(length > half, op, ": reflect padding by n_fft / 2 = ", half, " needs more than ", half,
            " samples, got ", length, " (the reference's torch.stft fails the same way)");
  switch (common_device(op, {&x, &window}).type) {
    case DeviceType::CPU: return cpu::stft_magnitude(x, window, n_fft, hop);
    case DeviceType::CUDA: LTX_CUDA_DISPATCH(return cuda::stft_magnitude(x, window, n_fft, hop), op);
  }
  unreachable_device(op);
}

}  // namespace ltx::ops
