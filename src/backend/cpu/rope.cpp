#include "backend/cpu/rope.h"

#include <algorithm>
#include <array>
#include <vector>

#include "backend/cpu/norm.h"
#include "backend/cpu/reduce_kernel.h"
#include "core/parallel.h"

namespace ltx::cpu {

namespace {

// One row of D values. Each output is two rounded fp32 products combined by one rounded
// add/subtract; ISO C++ mode (-std=c++20) keeps GCC from contracting them into FMAs.
// kUnit: all three last-dim strides are 1 (lets the compiler vectorise).
template <bool kUnit>
void rotate_row(const float* x, int64_t xs, const float* c, int64_t cs, const float* s,
                int64_t ss, float* y, int64_t d, ops::RopeLayout layout) {
  if constexpr (kUnit) xs = cs = ss = 1;
  if (layout == ops::RopeLayout::Split) {
    const int64_t half = d / 2;
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = x[i * xs], x2 = x[(i + half) * xs];
      const float ci = c[i * cs], si = s[i * ss];
      const float a1 = x1 * ci, b1 = x2 * si;
      const float a2 = x2 * ci, b2 = x1 * si;
      y[i] = a1 - b1;
      y[i + half] = a2 + b2;
    }
  } else {
    for (int64_t i = 0; i < d; i += 2) {
      const float x0 = x[i * xs], x1 = x[(i + 1) * xs];
      const float a0 = x0 * c[i * cs], b0 = x1 * s[i * ss];
      const float a1 = x1 * c[(i + 1) * cs], b1 = x0 * s[(i + 1) * ss];
      y[i] = a0 - b0;
      y[i + 1] = a1 + b1;
    }
  }
}

}  // namespace

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout) {
  Tensor out = Tensor::empty(x.shape());
  if (out.numel() == 0) return out;
  const int64_t d = x.size(-1), rows = x.numel() / d;
  const int nd = x.dim() - 1;  // leading (row) dims, shared by x and the expanded cos/sin
  const float* px = x.data<float>();
  const float* pc = cos.data<float>();
  const float* ps = sin.data<float>();
  float* po = out.data<float>();
  const int64_t xs = x.stride(-1), cs = cos.stride(-1), ss = sin.stride(-1);
  const bool unit = xs == 1 && cs == 1 && ss == 1;
  int64_t size[kMaxDims] = {}, xst[kMaxDims] = {}, cst[kMaxDims] = {}, sst[kMaxDims] = {};
  for (int k = 0; k < nd; ++k) {
    size[k] = x.size(k);
    xst[k] = x.stride(k);
    cst[k] = cos.stride(k);
    sst[k] = sin.stride(k);
  }

  parallel_for(0, rows, std::max<int64_t>(1, 8192 / d), [&](int64_t r0, int64_t r1) {
    int64_t idx[kMaxDims] = {};
    int64_t ox = 0, oc = 0, os = 0;
    int64_t rest = r0;
    for (int k = nd - 1; k >= 0; --k) {  // multi-index of row r0
      idx[k] = rest % size[k];
      rest /= size[k];
      ox += idx[k] * xst[k];
      oc += idx[k] * cst[k];
      os += idx[k] * sst[k];
    }
    for (int64_t r = r0; r < r1; ++r) {
      if (unit) {
        rotate_row<true>(px + ox, 1, pc + oc, 1, ps + os, 1, po + r * d, d, layout);
      } else {
        rotate_row<false>(px + ox, xs, pc + oc, cs, ps + os, ss, po + r * d, d, layout);
      }
      for (int k = nd - 1; k >= 0; --k) {  // odometer step to row r + 1
        if (++idx[k] < size[k]) {
          ox += xst[k];
          oc += cst[k];
          os += sst[k];
          break;
        }
        ox -= xst[k] * (size[k] - 1);
        oc -= cst[k] * (size[k] - 1);
        os -= sst[k] * (size[k] - 1);
        idx[k] = 0;
      }
    }
  });
  return out;
}

ops::QkRope qk_norm_rope_3d(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                            const Tensor& k_weight, double eps, float q_scale,
                            const ops::Rope3dTables& rope) {
  ops::QkRope out{Tensor::empty(q.shape()), Tensor::empty(k.shape())};
  if (q.numel() == 0) return out;
  const int64_t d = q.size(5), rows = q.numel() / d;
  constexpr int kLead = 5;  // [B, T, H, W, heads]
  int64_t size[kLead];
  for (int i = 0; i < kLead; ++i) size[i] = q.size(i);
  struct Side {
    const float* x;
    int64_t st[kLead + 1];
    const float* w;
    float* y;
    bool scaled;
  };
  Tensor qw, kw;  // contiguous weights, kept alive
  Side side[2];
  for (int s = 0; s < 2; ++s) {
    const Tensor& x = s == 0 ? q : k;
    const Tensor& w = s == 0 ? q_weight : k_weight;
    Tensor& keep = s == 0 ? qw : kw;
    if (w.defined()) keep = w.contiguous();
    side[s].x = x.data<float>();
    for (int i = 0; i <= kLead; ++i) side[s].st[i] = x.stride(i);
    side[s].w = w.defined() ? keep.data<float>() : nullptr;
    side[s].y = (s == 0 ? out.q : out.k).data<float>();
    side[s].scaled = s == 0;
  }
  std::array<Tensor, 3> cos, sin;  // contiguous [L, d_a]
  std::array<int64_t, 3> width{}, start{};
  for (int a = 0; a < 3; ++a) {
    cos[a] = rope.cos[a].contiguous();
    sin[a] = rope.sin[a].contiguous();
    width[a] = cos[a].size(1);
    start[a] = a == 0 ? 0 : start[a - 1] + width[a - 1];
  }

  parallel_for(0, 2 * rows, std::max<int64_t>(1, 8192 / d), [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<size_t>(d));
    for (int64_t g = r0; g < r1; ++g) {
      const Side& sd = side[g < rows ? 0 : 1];
      const int64_t row = g < rows ? g : g - rows;
      int64_t idx[kLead], off = 0, rem = row;
      for (int i = kLead - 1; i >= 0; --i) {
        idx[i] = rem % size[i];
        rem /= size[i];
        off += idx[i] * sd.st[i];
      }
      const float* x = sd.x + off;
      for (int64_t i = 0; i < d; ++i) buf[i] = x[i * sd.st[kLead]];
      // rms_norm: y = (x * rs) * w, then mul(y, q_scale) for q (ops in the same f32 order).
      const float rs = rstd_of(row_sum_sq(buf.data(), d), d, eps);
      for (int64_t i = 0; i < d; ++i) {
        float v = buf[i] * rs;
        if (sd.w != nullptr) v = v * sd.w[i];
        if (sd.scaled) v = v * q_scale;
        buf[i] = v;
      }
      float* y = sd.y + row * d;
      for (int a = 0; a < 3; ++a) {
        const int64_t at = idx[1 + a] * width[a];
        rotate_row<true>(buf.data() + start[a], 1, cos[a].data<float>() + at, 1,
                         sin[a].data<float>() + at, 1, y + start[a], width[a],
                         ops::RopeLayout::Interleaved);
      }
    }
  });
  return out;
}

}  // namespace ltx::cpu
