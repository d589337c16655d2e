#include "backend/cuda/norm.h"

#include <algorithm>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/reduce_plan.h"
#include "backend/scalar_math.h"
#include "backend/strided_layout.h"
#include "ops/dispatch.h"

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

// Where scale and shift of rms_norm_modulate live: x's leading dims (all but the last) with their
// broadcast strides, and their stride along the last dim.
struct ModArgs {
  int lead = 0;
  int64_t size[kMaxDims] = {};
  int64_t s_stride[kMaxDims] = {}, t_stride[kMaxDims] = {};
  int64_t s_last = 0, t_last = 0;
  const void* s = nullptr;
  const void* t = nullptr;
  DType s_dtype = DType::F32, t_dtype = DType::F32;
};

// x's own storage rounding of v (what rms_norm stores before modulate reloads it).
__device__ __forceinline__ float round_to(DType dt, float v) {
  return dt == DType::BF16 ? dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(v)) : v;
}

// rms_norm_kernel's statistics (same thread layout and sums), then scalar::modulate.
__global__ void rms_norm_modulate_kernel(RowArgs a, ModArgs m) {
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      const float v = load_f32(a.x, a.x_dtype, base + i);
      ss += v * v;
    }
    const float rs = inv_std(block_sum(ss), a.d, a.eps);
    int64_t so = 0, to = 0, rem = r;
    for (int d = m.lead - 1; d >= 0; --d) {
      const int64_t idx = rem % m.size[d];
      rem /= m.size[d];
      so += idx * m.s_stride[d];
      to += idx * m.t_stride[d];
    }
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      const float y = round_to(a.x_dtype, mul_rn(load_f32(a.x, a.x_dtype, base + i), rs));
      const float sc = load_f32(m.s, m.s_dtype, so + i * m.s_last);
      const float sh = load_f32(m.t, m.t_dtype, to + i * m.t_last);
      store_f32(a.y, a.y_dtype, base + i, scalar::modulate(y, sc, sh));
    }
  }
}

__global__ void layer_norm_kernel(RowArgs a) {
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    // The sum runs over x - x[0]: an f32 sum of values far from zero (mean 1e4, spread 1) would
    // lose the mean's low bits, while the shifted sum keeps it to ~1e-7 of the spread.
    const float shift = load_f32(a.x, a.x_dtype, base);
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x)
      s += load_f32(a.x, a.x_dtype, base + i) - shift;
    const double sum = block_sum(s);
    const float mean = static_cast<float>(shift + sum / static_cast<double>(a.d));
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

// PixelNorm over the middle dim of [A, R, B]: one thread per (a, b) column, neighbouring threads
// on neighbouring columns; the sum of squares in double like the CPU's.
__global__ void rms_norm_dim_kernel(RowArgs a, int64_t outer, int64_t inner) {
  const int64_t n = outer * inner, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const int64_t base = (o / inner) * a.d * inner + o % inner;
    double ss = 0.0;
    for (int64_t r = 0; r < a.d; ++r) {
      const double v = load_f32(a.x, a.x_dtype, base + r * inner);
      ss += v * v;
    }
    // PixelNorm divides by the RMS (not a multiply by its inverse): keep that rounding.
    const float rms = static_cast<float>(sqrt(ss / static_cast<double>(a.d) + a.eps));
    for (int64_t r = 0; r < a.d; ++r) {
      const int64_t i = base + r * inner;
      store_f32(a.y, a.y_dtype, i, load_f32(a.x, a.x_dtype, i) / rms);
    }
  }
}

// GroupNorm: one block per (n, group), whose channels x positions are one contiguous run of
// a.d elements in [N, C, *spatial]; `hw` positions per channel, `cpg` channels per group. The
// runs can hold millions of elements, so the partial sums are double here.
__global__ void group_norm_kernel(RowArgs a, int64_t hw, int64_t cpg, int64_t groups) {
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) s += load_f32(a.x, a.x_dtype, base + i);
    const double mean_d = block_sum(s) / static_cast<double>(a.d);
    double ssd = 0.0;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      const double dv = load_f32(a.x, a.x_dtype, base + i) - mean_d;
      ssd += dv * dv;
    }
    ssd = block_sum(ssd);
    const float mean = static_cast<float>(mean_d);
    const float rs = static_cast<float>(1.0 / sqrt(ssd / static_cast<double>(a.d) + a.eps));
    const bool affine = a.w != nullptr || a.b != nullptr;
    const int64_t c0 = (r % groups) * cpg;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      float y = mul_rn(add_rn(load_f32(a.x, a.x_dtype, base + i), -mean), rs);
      if (affine) {
        const int64_t c = c0 + i / hw;
        const float wc = a.w != nullptr ? load_f32(a.w, a.w_dtype, c) : 1.f;
        const float bc = a.b != nullptr ? load_f32(a.b, a.b_dtype, c) : 0.f;
        y = add_rn(mul_rn(y, wc), bc);
      }
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

// Arguments for x (made contiguous into *xc), the optional affine tensors and a new output.
RowArgs row_args(const Tensor& x, Tensor* xc, const Tensor& weight, const Tensor& bias,
                 Tensor* keep_w, Tensor* keep_b, const Tensor& out, double eps) {
  *xc = x.contiguous();
  *keep_w = weight.defined() ? weight.contiguous() : Tensor();
  *keep_b = bias.defined() ? bias.contiguous() : Tensor();
  RowArgs a{};
  a.x = xc->raw_data();
  a.x_dtype = xc->dtype();
  a.w = keep_w->defined() ? keep_w->raw_data() : nullptr;
  a.w_dtype = keep_w->defined() ? keep_w->dtype() : DType::F32;
  a.b = keep_b->defined() ? keep_b->raw_data() : nullptr;
  a.b_dtype = keep_b->defined() ? keep_b->dtype() : DType::F32;
  a.y = out.raw_data();
  a.y_dtype = out.dtype();
  a.eps = eps;
  return a;
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
}

template <typename Kernel>
Tensor run_rows(Kernel kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                double eps) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  Tensor xc, wc, bc;
  RowArgs a = row_args(x, &xc, weight, bias, &wc, &bc, out, eps);
  a.d = x.size(-1);
  a.rows = x.numel() / a.d;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  kernel<<<row_blocks(a.rows), row_threads(a.d), 0, current_stream(dev).handle()>>>(a);
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

Tensor rms_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, double eps) {
  Tensor out = Tensor::empty(x.shape(), ops::float_result_dtype({&x, &scale, &shift}), x.device());
  if (out.numel() == 0) return out;
  Tensor xc, wc, bc;
  RowArgs a = row_args(x, &xc, Tensor(), Tensor(), &wc, &bc, out, eps);
  a.d = x.size(-1);
  a.rows = x.numel() / a.d;
  const Strides ss = broadcast_strides(scale, x.shape()), ts = broadcast_strides(shift, x.shape());
  ModArgs m;
  m.lead = x.dim() - 1;
  for (int d = 0; d < m.lead; ++d) {
    m.size[d] = x.size(d);
    m.s_stride[d] = ss[d];
    m.t_stride[d] = ts[d];
  }
  m.s_last = ss[x.dim() - 1];
  m.t_last = ts[x.dim() - 1];
  m.s = scale.raw_data();
  m.t = shift.raw_data();
  m.s_dtype = scale.dtype();
  m.t_dtype = shift.dtype();
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  rms_norm_modulate_kernel<<<row_blocks(a.rows), row_threads(a.d), 0,
                             current_stream(dev).handle()>>>(a, m);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

Tensor rms_norm_dim(const Tensor& x, int dim, double eps) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const Split3 s = x.dim() == 0 ? Split3{} : split3(x.shape(), dim, dim);
  Tensor xc, wc, bc;
  RowArgs a = row_args(x, &xc, Tensor(), Tensor(), &wc, &bc, out, eps);
  a.d = s.r;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  constexpr int kThreads = 256;
  rms_norm_dim_kernel<<<grid_for(s.a * s.b, kThreads, dev), kThreads, 0,
                        current_stream(dev).handle()>>>(a, s.a, s.b);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const int64_t n = x.size(0), c = x.size(1), hw = x.numel() / (n * c), cpg = c / num_groups;
  Tensor xc, wc, bc;
  RowArgs a = row_args(x, &xc, weight, bias, &wc, &bc, out, eps);
  a.rows = n * num_groups;
  a.d = cpg * hw;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  group_norm_kernel<<<row_blocks(a.rows), 256, 0, current_stream(dev).handle()>>>(a, hw, cpg,
                                                                                num_groups);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace ltx::cuda
