#include "backend/cpu/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/reduce_kernel.h"
#include "backend/common/scalar_math.h"
#include "core/parallel.h"

namespace ltx::cpu {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

using scalar::max_nan;
using scalar::min_nan;

template <typename T>
void store(const std::vector<T>& v, float* out, double scale = 1.0) {
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i] * scale);
}

struct ArgAcc {
  float value = 0.f;
  int64_t index = -1;  // -1: nothing seen yet
};

// True when v should replace the current best: strictly greater, or the first NaN.
inline bool arg_better(float v, float best) { return best == best && (v != v || v > best); }

}  // namespace

Tensor reduce(ops::ReduceOp op, const Tensor& x, const std::vector<int>& dims, bool keepdim) {
  const ReducePlan p = plan_reduce(x, dims, keepdim);
  Tensor out = Tensor::empty(p.out_shape);
  if (out.numel() == 0) return out;
  const float* in = p.data.data<float>();
  float* o = out.data<float>();
  switch (op) {
    case ops::ReduceOp::Sum:
      store(sum_3d(in, p.s), o);
      break;
    case ops::ReduceOp::Mean:
      store(mean_3d(in, p.s), o);
      break;
    case ops::ReduceOp::Amax:
      store(reduce_3d<float>(
                in, p.s, -kInf, [](float& acc, float v, int64_t, int64_t) { acc = max_nan(acc, v); },
                [](float& acc, const float& later) { acc = max_nan(acc, later); }),
            o);
      break;
    case ops::ReduceOp::Amin:
      store(reduce_3d<float>(
                in, p.s, kInf, [](float& acc, float v, int64_t, int64_t) { acc = min_nan(acc, v); },
                [](float& acc, const float& later) { acc = min_nan(acc, later); }),
            o);
      break;
  }
  return out;
}

Tensor var(const Tensor& x, const std::vector<int>& dims, int64_t correction, bool keepdim,
           bool take_sqrt) {
  const ReducePlan p = plan_reduce(x, dims, keepdim);
  Tensor out = Tensor::empty(p.out_shape);
  if (out.numel() == 0) return out;
  const float* in = p.data.data<float>();
  const std::vector<double> mean = mean_3d(in, p.s);
  const std::vector<double> ssd = sum_sq_dev_3d(in, p.s, mean);
  const double divisor = std::max<double>(0.0, static_cast<double>(p.s.r - correction));
  float* o = out.data<float>();
  for (size_t i = 0; i < ssd.size(); ++i) {
    const double v = ssd[i] / divisor;
    o[i] = static_cast<float>(take_sqrt ? std::sqrt(v) : v);
  }
  return out;
}

Tensor argmax(const Tensor& x, int dim, bool keepdim) {
  const ReducePlan p =
      plan_reduce(x, x.dim() == 0 ? std::vector<int>{} : std::vector<int>{dim}, keepdim);
  Tensor out = Tensor::empty(p.out_shape, DType::I64);
  if (out.numel() == 0) return out;
  const std::vector<ArgAcc> acc = reduce_3d<ArgAcc>(
      p.data.data<float>(), p.s, ArgAcc{},
      [](ArgAcc& a, float v, int64_t r, int64_t) {
        if (a.index < 0 || arg_better(v, a.value)) a = {v, r};
      },
      [](ArgAcc& a, const ArgAcc& later) {
        if (later.index >= 0 && (a.index < 0 || arg_better(later.value, a.value))) a = later;
      });
  int64_t* o = out.data<int64_t>();
  for (size_t i = 0; i < acc.size(); ++i) o[i] = std::max<int64_t>(acc[i].index, 0);
  return out;
}

Tensor softmax(const Tensor& x, int dim, bool log) {
  const Tensor xc = x.contiguous();
  Tensor out = Tensor::empty(x.shape());
  if (out.numel() == 0) return out;
  const Split3 s = x.dim() == 0 ? Split3{} : split3(x.shape(), dim, dim);
  const int64_t A = s.a, D = s.r, B = s.b;
  const float* in = xc.data<float>();
  float* o = out.data<float>();
  if (B == 1) {
    parallel_for(0, A, std::max<int64_t>(1, kReduceGrain / D), [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a) {
        const float* xr = in + a * D;
        float* yr = o + a * D;
        float m = -kInf;
        for (int64_t d = 0; d < D; ++d) m = max_nan(m, xr[d]);
        double sum = 0;
        for (int64_t d = 0; d < D; ++d) {
          const float e = std::exp(xr[d] - m);
          yr[d] = e;
          sum += e;
        }
        if (log) {
          const float ls = static_cast<float>(std::log(sum));
          for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] - m) - ls;
        } else {
          const float inv = static_cast<float>(1.0 / sum);
          for (int64_t d = 0; d < D; ++d) yr[d] *= inv;
        }
      }
    });
    return out;
  }
  // dim is not the last one: process blocks of columns so that every pass reads contiguously.
  const int64_t nblocks = (B + kReduceColBlock - 1) / kReduceColBlock;
  const int64_t per_task = D * std::min(B, kReduceColBlock);
  parallel_for(0, A * nblocks, std::max<int64_t>(1, kReduceGrain / per_task),
               [&](int64_t t0, int64_t t1) {
                 float m[kReduceColBlock], f[kReduceColBlock];
                 double sum[kReduceColBlock];
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t a = t / nblocks, b0 = (t % nblocks) * kReduceColBlock;
                   const int64_t nb = std::min(B, b0 + kReduceColBlock) - b0;
                   const float* xa = in + a * D * B + b0;
                   float* ya = o + a * D * B + b0;
                   std::fill(m, m + nb, -kInf);
                   std::fill(sum, sum + nb, 0.0);
                   for (int64_t d = 0; d < D; ++d)
                     for (int64_t j = 0; j < nb; ++j) m[j] = max_nan(m[j], xa[d * B + j]);
                   for (int64_t d = 0; d < D; ++d) {
                     for (int64_t j = 0; j < nb; ++j) {
                       const float e = std::exp(xa[d * B + j] - m[j]);
                       ya[d * B + j] = e;
                       sum[j] += e;
                     }
                   }
                   for (int64_t j = 0; j < nb; ++j)
                     f[j] = static_cast<float>(log ? std::log(sum[j]) : 1.0 / sum[j]);
                   for (int64_t d = 0; d < D; ++d) {
                     for (int64_t j = 0; j < nb; ++j) {
                       float& y = ya[d * B + j];
                       y = log ? (xa[d * B + j] - m[j]) - f[j] : y * f[j];
                     }
                   }
                 }
               });
  return out;
}

}  // namespace ltx::cpu
