#include "backend/cuda/reduce.h"

#include <algorithm>
#include <climits>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/common/reduce_plan.h"

namespace ltx::cuda {

namespace {

using scalar::max_nan;
using scalar::min_nan;

enum class Mode : int { Sum, Mean, Amax, Amin, Var, Std };

// x viewed as contiguous [A, R, B], reduced over R into A * B outputs.
struct ReduceArgs {
  const void* x = nullptr;
  DType x_dtype = DType::F32;
  void* out = nullptr;
  DType out_dtype = DType::F32;
  int64_t a = 1, r = 1, b = 1;
  Mode mode = Mode::Sum;
  double divisor = 1.0;  // Var/Std: max(0, R - correction)
};

__device__ __forceinline__ float at(const ReduceArgs& g, int64_t a, int64_t r, int64_t b) {
  return load_f32(g.x, g.x_dtype, (a * g.r + r) * g.b + b);
}

__device__ __forceinline__ float finish_variance(double ssd, double divisor, bool take_sqrt) {
  const double v = ssd / divisor;
  return static_cast<float>(take_sqrt ? sqrt(v) : v);
}

// B == 1: one block per output, the block's threads stride over R.
__global__ void reduce_rows_kernel(ReduceArgs g) {
  const float kInf = INFINITY;
  for (int64_t a = blockIdx.x; a < g.a; a += gridDim.x) {
    float result = 0.f;
    if (g.mode == Mode::Amax || g.mode == Mode::Amin) {
      const bool is_max = g.mode == Mode::Amax;
      float m = is_max ? -kInf : kInf;
      for (int64_t r = threadIdx.x; r < g.r; r += blockDim.x) {
        const float v = at(g, a, r, 0);
        m = is_max ? max_nan(m, v) : min_nan(m, v);
      }
      result = is_max ? block_reduce(m, MaxOp{}, -kInf) : block_reduce(m, MinOp{}, kInf);
    } else {
      double s = 0.0;
      for (int64_t r = threadIdx.x; r < g.r; r += blockDim.x) s += at(g, a, r, 0);
      s = block_sum(s);
      if (g.mode == Mode::Sum) {
        result = static_cast<float>(s);
      } else {
        const double mean = s / static_cast<double>(g.r);
        if (g.mode == Mode::Mean) {
          result = static_cast<float>(mean);
        } else {
          double ssd = 0.0;
          for (int64_t r = threadIdx.x; r < g.r; r += blockDim.x) {
            const double dv = static_cast<double>(at(g, a, r, 0)) - mean;
            ssd += dv * dv;
          }
          result = finish_variance(block_sum(ssd), g.divisor, g.mode == Mode::Std);
        }
      }
    }
    if (threadIdx.x == 0) store_f32(g.out, g.out_dtype, a, result);
  }
}

// B > 1: one thread per output (a, b); neighbouring threads read neighbouring columns.
__global__ void reduce_cols_kernel(ReduceArgs g) {
  const float kInf = INFINITY;
  const int64_t n = g.a * g.b, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const int64_t a = o / g.b, b = o % g.b;
    float result = 0.f;
    if (g.mode == Mode::Amax || g.mode == Mode::Amin) {
      const bool is_max = g.mode == Mode::Amax;
      float m = is_max ? -kInf : kInf;
      for (int64_t r = 0; r < g.r; ++r) {
        const float v = at(g, a, r, b);
        m = is_max ? max_nan(m, v) : min_nan(m, v);
      }
      result = m;
    } else {
      double s = 0.0;
      for (int64_t r = 0; r < g.r; ++r) s += at(g, a, r, b);
      const double mean = s / static_cast<double>(g.r);
      if (g.mode == Mode::Sum) {
        result = static_cast<float>(s);
      } else if (g.mode == Mode::Mean) {
        result = static_cast<float>(mean);
      } else {
        double ssd = 0.0;
        for (int64_t r = 0; r < g.r; ++r) {
          const double dv = static_cast<double>(at(g, a, r, b)) - mean;
          ssd += dv * dv;
        }
        result = finish_variance(ssd, g.divisor, g.mode == Mode::Std);
      }
    }
    store_f32(g.out, g.out_dtype, o, result);
  }
}

// Amax / Amin over a long R with few outputs (a whole-tensor amax: one output, R = numel) would
// leave all but a few multiprocessors idle with one block per output: blocks of this kernel each
// take a span of `span` values of one output row and write its extreme as f32 to
// partial[a * splits + s]; a second pass reduces the partials. The result does not depend on the
// order (min / max are exact, NaN wins either way), so it equals the one-block path bit for bit.
__global__ void reduce_rows_split_kernel(ReduceArgs g, float* partial, int64_t splits,
                                         int64_t span) {
  const float kInf = INFINITY;
  const bool is_max = g.mode == Mode::Amax;
  const int64_t n = g.a * splits;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int64_t a = i / splits, s = i % splits;
    const int64_t end = std::min(g.r, (s + 1) * span);
    float m = is_max ? -kInf : kInf;
    for (int64_t r = s * span + threadIdx.x; r < end; r += blockDim.x) {
      const float v = at(g, a, r, 0);
      m = is_max ? max_nan(m, v) : min_nan(m, v);
    }
    m = is_max ? block_reduce(m, MaxOp{}, -kInf) : block_reduce(m, MinOp{}, kInf);
    if (threadIdx.x == 0) partial[i] = m;
  }
}

int block_threads(int64_t r) {
  int t = 32;
  while (t < 256 && t < r) t *= 2;
  return t;
}

// Every kernel here works on [A, R, B]: B == 1 runs `rows` (one block per output row), else
// `cols` (one thread per output column).
template <typename Args>
void launch(void (*rows)(Args), void (*cols)(Args), const Args& g, int64_t a, int64_t r,
            int64_t b, int dev) {
  DeviceGuard guard(dev);
  const cudaStream_t s = current_stream(dev).handle();
  if (b == 1) {
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a, int64_t{1} << 20));
    rows<<<blocks, block_threads(r), 0, s>>>(g);
  } else {
    constexpr int kThreads = 256;
    cols<<<grid_for(a * b, kThreads, dev), kThreads, 0, s>>>(g);
  }
  LTX_CUDA_CHECK_LAUNCH();
}

Tensor run(Mode mode, const Tensor& x, const std::vector<int>& dims, bool keepdim,
           double divisor) {
  const ReducePlan p = plan_reduce(x, dims, keepdim);
  Tensor out = Tensor::empty(p.out_shape, x.dtype(), x.device());
  if (out.numel() == 0) return out;
  ReduceArgs g;
  g.x = p.data.raw_data();
  g.x_dtype = p.data.dtype();
  g.out = out.raw_data();
  g.out_dtype = out.dtype();
  g.a = p.s.a;
  g.r = p.s.r;
  g.b = p.s.b;
  g.mode = mode;
  g.divisor = divisor;
  const int dev = x.device().index;
  constexpr int64_t kMinSpan = 16384;  // values per block of the split pass, at least
  const int64_t target_blocks = static_cast<int64_t>(multiprocessor_count(dev)) * 4;
  if ((mode == Mode::Amax || mode == Mode::Amin) && g.b == 1 && g.a < target_blocks &&
      g.r >= 2 * kMinSpan) {
    const int64_t splits =
        std::max<int64_t>(2, std::min(target_blocks / g.a, (g.r + kMinSpan - 1) / kMinSpan));
    const int64_t span = (g.r + splits - 1) / splits;
    Tensor partial = Tensor::empty({g.a, splits}, DType::F32, x.device());
    {
      DeviceGuard guard(dev);
      const cudaStream_t st = current_stream(dev).handle();
      reduce_rows_split_kernel<<<static_cast<unsigned>(g.a * splits), 256, 0, st>>>(
          g, static_cast<float*>(partial.raw_data()), splits, span);
      LTX_CUDA_CHECK_LAUNCH();
    }
    g.x = partial.raw_data();
    g.x_dtype = DType::F32;
    g.r = splits;
  }
  launch(reduce_rows_kernel, reduce_cols_kernel, g, g.a, g.r, g.b, dev);
  return out;
}

// ---- argmax: the first maximum; a NaN counts as the maximum (the first NaN wins).

struct Best {
  float v;
  int64_t i;
};

__device__ __forceinline__ Best pick(Best a, Best b) {
  const bool an = a.v != a.v, bn = b.v != b.v;
  if (an != bn) return an ? a : b;
  if (!an && a.v != b.v) return a.v > b.v ? a : b;
  return a.i <= b.i ? a : b;
}

__device__ __forceinline__ Best warp_pick(Best x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    Best y{__shfl_xor_sync(0xffffffffu, x.v, o), __shfl_xor_sync(0xffffffffu, x.i, o)};
    x = pick(x, y);
  }
  return x;
}

struct ArgArgs {
  const void* x;
  DType x_dtype;
  int64_t* out;
  int64_t a, r, b;
};

__global__ void argmax_rows_kernel(ArgArgs g) {
  __shared__ Best part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  for (int64_t a = blockIdx.x; a < g.a; a += gridDim.x) {
    Best best{-INFINITY, LLONG_MAX};
    for (int64_t r = threadIdx.x; r < g.r; r += blockDim.x)
      best = pick(best, Best{load_f32(g.x, g.x_dtype, a * g.r + r), r});
    best = warp_pick(best);
    if (lane == 0) part[warp] = best;
    __syncthreads();
    if (warp == 0) {
      Best w = lane < warps ? part[lane] : Best{-INFINITY, LLONG_MAX};
      w = warp_pick(w);
      if (lane == 0) g.out[a] = w.i;
    }
    __syncthreads();
  }
}

__global__ void argmax_cols_kernel(ArgArgs g) {
  const int64_t n = g.a * g.b, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const int64_t a = o / g.b, b = o % g.b;
    Best best{-INFINITY, LLONG_MAX};
    for (int64_t r = 0; r < g.r; ++r)
      best = pick(best, Best{load_f32(g.x, g.x_dtype, (a * g.r + r) * g.b + b), r});
    g.out[o] = best.i;
  }
}

// ---- softmax over R of [A, R, B]

struct SoftmaxArgs {
  const void* x;
  DType x_dtype;
  void* y;
  int64_t a, r, b;
  bool log;
};

__device__ __forceinline__ float softmax_out(float v, float m, float f, bool log) {
  return log ? (v - m) - f : expf(v - m) * f;
}

__global__ void softmax_rows_kernel(SoftmaxArgs g) {
  for (int64_t a = blockIdx.x; a < g.a; a += gridDim.x) {
    const int64_t base = a * g.r;
    float m = -INFINITY;
    for (int64_t r = threadIdx.x; r < g.r; r += blockDim.x)
      m = max_nan(m, load_f32(g.x, g.x_dtype, base + r));
    m = block_reduce(m, MaxOp{}, -INFINITY);
    double sum = 0.0;
    for (int64_t r = threadIdx.x; r < g.r; r += blockDim.x)
      sum += expf(load_f32(g.x, g.x_dtype, base + r) - m);
    sum = block_sum(sum);
    const float f = static_cast<float>(g.log ? ::log(sum) : 1.0 / sum);
    for (int64_t r = threadIdx.x; r < g.r; r += blockDim.x)
      store_f32(g.y, g.x_dtype, base + r,
                softmax_out(load_f32(g.x, g.x_dtype, base + r), m, f, g.log));
  }
}

__global__ void softmax_cols_kernel(SoftmaxArgs g) {
  const int64_t n = g.a * g.b, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const int64_t a = o / g.b, b = o % g.b, base = a * g.r * g.b + b;
    float m = -INFINITY;
    for (int64_t r = 0; r < g.r; ++r) m = max_nan(m, load_f32(g.x, g.x_dtype, base + r * g.b));
    double sum = 0.0;
    for (int64_t r = 0; r < g.r; ++r) sum += expf(load_f32(g.x, g.x_dtype, base + r * g.b) - m);
    const float f = static_cast<float>(g.log ? ::log(sum) : 1.0 / sum);
    for (int64_t r = 0; r < g.r; ++r) {
      const int64_t i = base + r * g.b;
      store_f32(g.y, g.x_dtype, i, softmax_out(load_f32(g.x, g.x_dtype, i), m, f, g.log));
    }
  }
}

}  // namespace

Tensor reduce(ops::ReduceOp op, const Tensor& x, const std::vector<int>& dims, bool keepdim) {
  Mode mode = Mode::Sum;
  switch (op) {
    case ops::ReduceOp::Sum: mode = Mode::Sum; break;
    case ops::ReduceOp::Mean: mode = Mode::Mean; break;
    case ops::ReduceOp::Amax: mode = Mode::Amax; break;
    case ops::ReduceOp::Amin: mode = Mode::Amin; break;
  }
  return run(mode, x, dims, keepdim, 1.0);
}

Tensor var(const Tensor& x, const std::vector<int>& dims, int64_t correction, bool keepdim,
           bool take_sqrt) {
  int64_t r = 1;
  for (int d : dims) r *= x.size(d);
  const double divisor = std::max<double>(0.0, static_cast<double>(r - correction));
  return run(take_sqrt ? Mode::Std : Mode::Var, x, dims, keepdim, divisor);
}

Tensor argmax(const Tensor& x, int dim, bool keepdim) {
  const ReducePlan p =
      plan_reduce(x, x.dim() == 0 ? std::vector<int>{} : std::vector<int>{dim}, keepdim);
  Tensor out = Tensor::empty(p.out_shape, DType::I64, x.device());
  if (out.numel() == 0) return out;
  const ArgArgs g{p.data.raw_data(), p.data.dtype(), static_cast<int64_t*>(out.raw_data()),
                  p.s.a, p.s.r, p.s.b};
  launch(argmax_rows_kernel, argmax_cols_kernel, g, g.a, g.r, g.b, x.device().index);
  return out;
}

Tensor softmax(const Tensor& x, int dim, bool log) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  const Split3 s3 = x.dim() == 0 ? Split3{} : split3(x.shape(), dim, dim);
  const SoftmaxArgs g{xc.raw_data(), xc.dtype(), out.raw_data(), s3.a, s3.r, s3.b, log};
  launch(softmax_rows_kernel, softmax_cols_kernel, g, g.a, g.r, g.b, x.device().index);
  return out;
}

}  // namespace ltx::cuda
