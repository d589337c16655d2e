#include "backend/cpu/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/elementwise.h"
#include "backend/cpu/reduce_kernel.h"
#include "backend/common/scalar_math.h"
#include "core/parallel.h"

namespace ltx::cpu {

namespace {

// Contiguous copy's data pointer, or null for an undefined (absent) affine tensor. `keep` holds
// the copy alive.
const float* optional_data(const Tensor& t, Tensor* keep) {
  if (!t.defined()) return nullptr;
  *keep = t.contiguous();
  return keep->data<float>();
}

// Runs fn(row) for rows [0, rows) of `len` elements each, in parallel.
template <typename Fn>
void for_rows(int64_t rows, int64_t len, Fn fn) {
  parallel_for(0, rows, std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(len, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) fn(r);
               });
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  Tensor out = Tensor::empty(x.shape());
  if (out.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  Tensor wkeep;
  const float* w = optional_data(weight, &wkeep);
  const int64_t D = x.size(-1), rows = x.numel() / D;
  const float* in = xc.data<float>();
  float* o = out.data<float>();
  const std::vector<double> ss = sum_sq_3d(in, {rows, D, 1});
  for_rows(rows, D, [&](int64_t r) {
    const float rs = rstd_of(ss[r], D, eps);
    const float* xr = in + r * D;
    float* yr = o + r * D;
    if (w) {
      for (int64_t d = 0; d < D; ++d) yr[d] = (xr[d] * rs) * w[d];
    } else {
      for (int64_t d = 0; d < D; ++d) yr[d] = xr[d] * rs;
    }
  });
  return out;
}

Tensor rms_norm_modulate(const Tensor& x, const Tensor& scale, const Tensor& shift, double eps,
                         const Tensor& weight) {
  return modulate(rms_norm(x, weight, eps), scale, shift);
}

Tensor rms_norm_dim(const Tensor& x, int dim, double eps, bool silu) {
  Tensor out = Tensor::empty(x.shape());
  if (out.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  const Split3 s = x.dim() == 0 ? Split3{} : split3(x.shape(), dim, dim);
  const float* in = xc.data<float>();
  float* o = out.data<float>();
  const std::vector<double> ss = sum_sq_3d(in, s);
  // PixelNorm divides by the RMS (rather than multiplying by its inverse); keep that rounding.
  std::vector<float> rms(ss.size());
  for (size_t i = 0; i < ss.size(); ++i)
    rms[i] = static_cast<float>(std::sqrt(ss[i] / static_cast<double>(s.r) + eps));
  const int64_t D = s.r, B = s.b;
  for_rows(s.a * D, B, [&](int64_t row) {  // row = a * D + d, B elements each
    const float* xr = in + row * B;
    float* yr = o + row * B;
    const float* rr = rms.data() + (row / D) * B;
    if (silu) {
      for (int64_t b = 0; b < B; ++b) yr[b] = scalar::unary<ops::UnaryOp::Silu>(xr[b] / rr[b]);
    } else {
      for (int64_t b = 0; b < B; ++b) yr[b] = xr[b] / rr[b];
    }
  });
  // A dense permuted input (channels-last) gets its layout back, like the CUDA op's result.
  if (!x.is_contiguous() && x.is_dense()) return out.contiguous_in_order(x.dim_order());
  return out;
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  Tensor out = Tensor::empty(x.shape());
  if (out.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  Tensor wkeep, bkeep;
  const float* w = optional_data(weight, &wkeep);
  const float* bi = optional_data(bias, &bkeep);
  const int64_t D = x.size(-1), rows = x.numel() / D;
  const float* in = xc.data<float>();
  float* o = out.data<float>();
  const Split3 s{rows, D, 1};
  const std::vector<double> mean = mean_3d(in, s);
  const std::vector<double> ssd = sum_sq_dev_3d(in, s, mean);
  for_rows(rows, D, [&](int64_t r) {
    const float m = static_cast<float>(mean[r]);
    const float rs = rstd_of(ssd[r], D, eps);
    const float* xr = in + r * D;
    float* yr = o + r * D;
    for (int64_t d = 0; d < D; ++d) {
      float y = (xr[d] - m) * rs;
      if (w) y *= w[d];
      if (bi) y += bi[d];
      yr[d] = y;
    }
  });
  return out;
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  Tensor out = Tensor::empty(x.shape());
  if (out.numel() == 0) return out;
  const Tensor xc = x.contiguous();
  Tensor wkeep, bkeep;
  const float* w = optional_data(weight, &wkeep);
  const float* bi = optional_data(bias, &bkeep);
  const int64_t N = x.size(0), C = x.size(1), G = num_groups;
  const int64_t hw = x.numel() / (N * C), cg = C / G;
  const float* in = xc.data<float>();
  float* o = out.data<float>();
  // In [N, C, *spatial] order each (n, group) is one contiguous block of cg * hw elements.
  const Split3 s{N * G, cg * hw, 1};
  const std::vector<double> mean = mean_3d(in, s);
  const std::vector<double> ssd = sum_sq_dev_3d(in, s, mean);
  for_rows(N * C, hw, [&](int64_t row) {  // row = n * C + c
    const int64_t n = row / C, c = row % C, grp = n * G + c / cg;
    const float m = static_cast<float>(mean[grp]);
    const float rs = rstd_of(ssd[grp], cg * hw, eps);
    const float wc = w ? w[c] : 1.f, bc = bi ? bi[c] : 0.f;
    const float* xr = in + row * hw;
    float* yr = o + row * hw;
    if (w || bi) {
      for (int64_t i = 0; i < hw; ++i) yr[i] = ((xr[i] - m) * rs) * wc + bc;
    } else {
      for (int64_t i = 0; i < hw; ++i) yr[i] = (xr[i] - m) * rs;
    }
  });
  return out;
}

}  // namespace ltx::cpu
