#include "backend/cuda/norm.h"

#include <algorithm>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/elementwise_loop.cuh"

namespace ltx::cuda {

namespace {

using dtype_bits::add_rn;
using dtype_bits::mul_rn;

struct RowArgs {
  const void* x;
  DType x_dtype;
  const void* w;  // null: no weight
  DType w_dtype;
  const void* b;  // null: no bias
  DType b_dtype;
  void* y;
  DType y_dtype;
  int64_t rows, d;
  double eps;
};

__device__ __forceinline__ float inv_std(float sum_sq, int64_t n, double eps) {
  return static_cast<float>(1.0 / sqrt(static_cast<double>(sum_sq) / static_cast<double>(n) + eps));
}

__global__ void rms_norm_kernel(RowArgs a) {
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      const float v = load_f32(a.x, a.x_dtype, base + i);
      ss += v * v;
    }
    const float rs = inv_std(block_sum(ss), a.d, a.eps);
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      float y = mul_rn(load_f32(a.x, a.x_dtype, base + i), rs);
      if (a.w != nullptr) y = mul_rn(y, load_f32(a.w, a.w_dtype, i));
      store_f32(a.y, a.y_dtype, base + i, y);
    }
  }
}

__global__ void layer_norm_kernel(RowArgs a) {
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) s += load_f32(a.x, a.x_dtype, base + i);
    const float mean = static_cast<float>(static_cast<double>(block_sum(s)) / static_cast<double>(a.d));
    float ssd = 0.f;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      const float dv = load_f32(a.x, a.x_dtype, base + i) - mean;
      ssd += dv * dv;
    }
    const float rs = inv_std(block_sum(ssd), a.d, a.eps);
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      float y = mul_rn(add_rn(load_f32(a.x, a.x_dtype, base + i), -mean), rs);
      if (a.w != nullptr) y = mul_rn(y, load_f32(a.w, a.w_dtype, i));
      if (a.b != nullptr) y = add_rn(y, load_f32(a.b, a.b_dtype, i));
      store_f32(a.y, a.y_dtype, base + i, y);
    }
  }
}

// Threads per row block: a warp for short rows, up to 256 (each thread then handles d / 256).
int row_threads(int64_t d) {
  int t = 32;
  while (t < 256 && t < d) t *= 2;
  return t;
}

template <typename Kernel>
Tensor run_rows(Kernel kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                double eps) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  RowArgs a{};
  a.x = xc.raw_data();
  a.x_dtype = xc.dtype();
  a.w = wc.defined() ? wc.raw_data() : nullptr;
  a.w_dtype = wc.defined() ? wc.dtype() : DType::F32;
  a.b = bc.defined() ? bc.raw_data() : nullptr;
  a.b_dtype = bc.defined() ? bc.dtype() : DType::F32;
  a.y = out.raw_data();
  a.y_dtype = out.dtype();
  a.d = x.size(-1);
  a.rows = x.numel() / a.d;
  a.eps = eps;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a.rows, int64_t{1} << 20));
  kernel<<<blocks, row_threads(a.d), 0, current_stream(dev).handle()>>>(a);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return run_rows(rms_norm_kernel, x, weight, Tensor(), eps);
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return run_rows(layer_norm_kernel, x, weight, bias, eps);
}

}  // namespace ltx::cuda
