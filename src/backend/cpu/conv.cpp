#include "backend/cpu/conv.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>
#include <vector>

#include "core/parallel.h"

namespace ltx::cpu {

namespace {

constexpr int64_t kDefaultMaxColumns = 1024;
constexpr int64_t kDefaultScratchFloats = int64_t{1} << 20;  // 4 MB per tile
// Below this many output channels per group a GEMM is too thin for OpenBLAS to thread well, so
// tiles run in parallel on the pool instead.
constexpr int64_t kThinGemmRows = 64;

std::atomic<int64_t> g_max_columns{kDefaultMaxColumns};
std::atomic<int64_t> g_scratch_floats{kDefaultScratchFloats};

// Runs run_item(i, scratch, inner_parallel) for every (batch, group) item: thin GEMMs gain more
// from running items in parallel (one scratch buffer per thread), wide ones from parallel inner work.
template <class RunItem>
void run_items(int64_t items, size_t scratch, bool thin, const RunItem& run_item) {
  if (thin && items > 1) {
    parallel_for(0, items, 1, [&](int64_t b, int64_t e) {
      std::vector<float> col(scratch);
      for (int64_t i = b; i < e; ++i) run_item(i, col.data(), false);
    });
  } else {
    std::vector<float> col(scratch);
    for (int64_t i = 0; i < items; ++i) run_item(i, col.data(), true);
  }
}

// A conv problem with its spatial dims padded to three (D, H, W); missing leading dims are size 1
// with unit stride/dilation and no padding.
using Geom = ops::ConvGeometry;

// The CPU runs its GEMMs through 32-bit BLAS indices.
Geom make_geom(const Tensor& x, const Tensor& w, const ops::ConvSpec& spec, bool transposed) {
  const Geom g = ops::conv_geometry(x, w, spec, transposed);
  LTX_CHECK(g.Pin < INT_MAX && g.Pout < INT_MAX && g.Cg * g.K < INT_MAX && g.Og * g.K < INT_MAX,
            "conv: problem too large for 32-bit BLAS indices (", x.describe(), ", weight ",
            w.describe(), "); split the input");
  return g;
}

Shape out_shape(const Geom& g, int rank) { return ops::conv_output_shape(g, rank); }

// The i in [a, b) with 0 <= i * s + off < n, as [*lo, *hi).
void valid_range(int64_t a, int64_t b, int64_t s, int64_t off, int64_t n, int64_t* lo,
                 int64_t* hi) {
  const int64_t first = off >= 0 ? 0 : (-off + s - 1) / s;
  const int64_t end = n - 1 - off >= 0 ? (n - 1 - off) / s + 1 : 0;
  *lo = std::min(std::max(a, first), b);
  *hi = std::max(*lo, std::min(b, end));
}

void unravel_kernel(const Geom& g, int64_t kidx, int64_t* kd, int64_t* kh, int64_t* kw) {
  *kw = kidx % g.k[2];
  *kh = (kidx / g.k[2]) % g.k[1];
  *kd = kidx / (g.k[2] * g.k[1]);
}

void sgemm(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
              static_cast<blasint>(ldc));
}

// ---------------------------------------------------------------- forward

// Writes im2col rows for input channels [c0, c1) of one group (xg points at its first channel)
// and output positions [p0, p0 + tn): row (c - c0) * K + tap, column t, leading dimension tn.
void fill_columns(const Geom& g, const float* xg, int64_t c0, int64_t c1, int64_t p0, int64_t tn,
                  float* col, bool parallel) {
  auto fill_rows = [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      const int64_t c = c0 + r / g.K;
      int64_t kd, kh, kw;
      unravel_kernel(g, r % g.K, &kd, &kh, &kw);
      const float* xc = xg + c * g.Pin;
      float* dst = col + r * tn;
      const int64_t off_w = kw * g.d[2] - g.p[2];
      int64_t t = 0, p = p0;
      while (t < tn) {  // one segment per output row (od, oh)
        const int64_t ow0 = p % g.out[2], oh = (p / g.out[2]) % g.out[1],
                      od = p / (g.out[2] * g.out[1]);
        const int64_t n = std::min(g.out[2] - ow0, tn - t);
        const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
        const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
        float* seg = dst + t;  // seg[j] is output column ow0 + j
        if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
          std::fill(seg, seg + n, 0.f);
        } else {
          const float* xrow = xc + (id * g.in[1] + ih) * g.in[2];
          int64_t lo, hi;
          valid_range(ow0, ow0 + n, g.s[2], off_w, g.in[2], &lo, &hi);
          std::fill(seg, seg + (lo - ow0), 0.f);
          if (g.s[2] == 1) {
            if (hi > lo)
              std::memcpy(seg + (lo - ow0), xrow + lo + off_w, (hi - lo) * sizeof(float));
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) seg[ow - ow0] = xrow[ow * g.s[2] + off_w];
          }
          std::fill(seg + (hi - ow0), seg + n, 0.f);
        }
        t += n;
        p += n;
      }
    }
  };
  const int64_t rows = (c1 - c0) * g.K;
  if (parallel) {
    parallel_for(0, rows, std::max<int64_t>(1, 16384 / tn), fill_rows);
  } else {
    fill_rows(0, rows);
  }
}

void fill_bias(float* y, int64_t n, const float* bias, int64_t o) {
  std::fill(y, y + n, bias ? bias[o] : 0.f);
}

void conv_depthwise(const Geom& g, const float* x, const float* w, const float* bias, float* y) {
  const int64_t rows = g.N * g.C * g.out[0];
  parallel_for(0, rows, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t od = r % g.out[0], nc = r / g.out[0], c = nc % g.C;
      const float* xb = x + nc * g.Pin;
      const float* wc = w + c * g.K;
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        float* yrow = y + ((nc * g.out[0] + od) * g.out[1] + oh) * g.out[2];
        fill_bias(yrow, g.out[2], bias, c);
        for (int64_t kd = 0; kd < g.k[0]; ++kd) {
          const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
          if (id < 0 || id >= g.in[0]) continue;
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
            if (ih < 0 || ih >= g.in[1]) continue;
            const float* xrow = xb + (id * g.in[1] + ih) * g.in[2];
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const float wv = wc[(kd * g.k[1] + kh) * g.k[2] + kw];
              const int64_t off = kw * g.d[2] - g.p[2];
              int64_t lo, hi;
              valid_range(0, g.out[2], g.s[2], off, g.in[2], &lo, &hi);
              for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] += wv * xrow[ow * g.s[2] + off];
            }
          }
        }
      }
    }
  });
}

void conv_pointwise(const Geom& g, const float* x, const float* w, const float* bias, float* y) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.G; ++grp) {
      float* yo = y + (n * g.O + grp * g.Og) * g.Pout;
      if (bias)
        for (int64_t o = 0; o < g.Og; ++o) fill_bias(yo + o * g.Pout, g.Pout, bias, grp * g.Og + o);
      sgemm(false, g.Og, g.Pout, g.Cg, w + grp * g.Og * g.Cg, g.Cg,
            x + (n * g.C + grp * g.Cg) * g.Pin, g.Pin, bias ? 1.f : 0.f, yo, g.Pout);
    }
}

void conv_im2col(const Geom& g, const float* x, const float* w, const float* bias, float* y) {
  const int64_t budget = g_scratch_floats.load();
  int64_t T = std::min(g.Pout, g_max_columns.load());
  if (g.K * T > budget) T = std::max<int64_t>(1, budget / g.K);
  const int64_t cc = std::clamp<int64_t>(budget / (g.K * T), 1, g.Cg);  // channels per block
  const int64_t tiles = (g.Pout + T - 1) / T;
  const int64_t items = g.N * g.G * tiles;
  const int64_t ldw = g.Cg * g.K;

  auto run_item = [&](int64_t item, float* col, bool parallel_fill) {
    const int64_t tile = item % tiles, grp = (item / tiles) % g.G, n = item / (tiles * g.G);
    const int64_t p0 = tile * T, tn = std::min(T, g.Pout - p0);
    float* yo = y + (n * g.O + grp * g.Og) * g.Pout + p0;
    for (int64_t o = 0; o < g.Og; ++o) fill_bias(yo + o * g.Pout, tn, bias, grp * g.Og + o);
    const float* xg = x + (n * g.C + grp * g.Cg) * g.Pin;
    const float* wg = w + grp * g.Og * ldw;
    for (int64_t c0 = 0; c0 < g.Cg; c0 += cc) {
      const int64_t c1 = std::min(g.Cg, c0 + cc);
      fill_columns(g, xg, c0, c1, p0, tn, col, parallel_fill);
      sgemm(false, g.Og, tn, (c1 - c0) * g.K, wg + c0 * g.K, ldw, col, tn, 1.f, yo, g.Pout);
    }
  };

  run_items(items, static_cast<size_t>(cc * g.K * T), g.Og < kThinGemmRows, run_item);
}

// ---------------------------------------------------------------- transposed

// Adds scale * crow back into the output plane yo, where crow holds, for kernel tap `kidx`, the
// contributions of input positions [p0, p0 + tn) (a GEMM tile row, or the input itself).
void scatter_row(const Geom& g, const float* crow, float scale, int64_t kidx, int64_t p0,
                 int64_t tn, float* yo) {
  int64_t kd, kh, kw;
  unravel_kernel(g, kidx, &kd, &kh, &kw);
  const int64_t off_w = kw * g.d[2] - g.p[2];
  int64_t t = 0, p = p0;
  while (t < tn) {
    const int64_t iw0 = p % g.in[2], ih = (p / g.in[2]) % g.in[1], id = p / (g.in[2] * g.in[1]);
    const int64_t n = std::min(g.in[2] - iw0, tn - t);
    const int64_t od = id * g.s[0] - g.p[0] + kd * g.d[0];
    const int64_t oh = ih * g.s[1] - g.p[1] + kh * g.d[1];
    if (od >= 0 && od < g.out[0] && oh >= 0 && oh < g.out[1]) {
      float* yrow = yo + (od * g.out[1] + oh) * g.out[2];
      const float* src = crow + t;  // src[j] is input column iw0 + j
      int64_t lo, hi;
      valid_range(iw0, iw0 + n, g.s[2], off_w, g.out[2], &lo, &hi);
      for (int64_t iw = lo; iw < hi; ++iw) yrow[iw * g.s[2] + off_w] += scale * src[iw - iw0];
    }
    t += n;
    p += n;
  }
}

void conv_transpose_depthwise(const Geom& g, const float* x, const float* w, const float* bias,
                              float* y) {
  parallel_for(0, g.N * g.C, 1, [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      const int64_t c = nc % g.C;
      float* yo = y + nc * g.Pout;
      fill_bias(yo, g.Pout, bias, c);
      for (int64_t kidx = 0; kidx < g.K; ++kidx)
        scatter_row(g, x + nc * g.Pin, w[c * g.K + kidx], kidx, 0, g.Pin, yo);
    }
  });
}

void conv_transpose_gemm(const Geom& g, const float* x, const float* w, const float* bias,
                         float* y) {
  const int64_t budget = g_scratch_floats.load();
  const int64_t rows = g.Og * g.K;
  int64_t T = std::min(g.Pin, g_max_columns.load());
  if (rows * T > budget) T = std::max<int64_t>(1, budget / rows);
  const int64_t items = g.N * g.G;

  auto run_item = [&](int64_t item, float* col, bool parallel_scatter) {
    const int64_t grp = item % g.G, n = item / g.G;
    const float* wg = w + grp * g.Cg * rows;  // [Cg, Og * K]
    const float* xg = x + (n * g.C + grp * g.Cg) * g.Pin;
    float* yg = y + (n * g.O + grp * g.Og) * g.Pout;
    for (int64_t o = 0; o < g.Og; ++o) fill_bias(yg + o * g.Pout, g.Pout, bias, grp * g.Og + o);
    for (int64_t p0 = 0; p0 < g.Pin; p0 += T) {
      const int64_t tn = std::min(T, g.Pin - p0);
      sgemm(true, rows, tn, g.Cg, wg, rows, xg + p0, g.Pin, 0.f, col, tn);
      // Each output channel's taps only touch its own output plane, so channels run in parallel.
      auto scatter = [&](int64_t ob, int64_t oe) {
        for (int64_t o = ob; o < oe; ++o)
          for (int64_t kidx = 0; kidx < g.K; ++kidx)
            scatter_row(g, col + (o * g.K + kidx) * tn, 1.f, kidx, p0, tn, yg + o * g.Pout);
      };
      if (parallel_scatter) {
        parallel_for(0, g.Og, 1, scatter);
      } else {
        scatter(0, g.Og);
      }
    }
  };

  run_items(items, static_cast<size_t>(rows * T), g.Og < kThinGemmRows, run_item);
}

}  // namespace

void set_conv_tile_limits(int64_t max_columns, int64_t max_scratch_floats) {
  g_max_columns = max_columns >= 1 ? max_columns : kDefaultMaxColumns;
  g_scratch_floats = max_scratch_floats >= 1 ? max_scratch_floats : kDefaultScratchFloats;
}

Tensor conv_nd(const Tensor& x, const Tensor& w, const Tensor& bias, const ops::ConvSpec& spec) {
  const Geom g = make_geom(x, w, spec, false);
  Tensor y = Tensor::empty(out_shape(g, spec.rank));
  if (y.numel() == 0) return y;
  const Tensor xc = x.contiguous(), wc = w.contiguous();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  const float* bp = bc.defined() ? bc.data<float>() : nullptr;
  float* yp = y.data<float>();
  if (g.Cg == 0) {  // no input channels: bias only
    for (int64_t no = 0; no < g.N * g.O; ++no) fill_bias(yp + no * g.Pout, g.Pout, bp, no % g.O);
    return y;
  }
  const bool unit = g.K == 1 && g.s[0] == 1 && g.s[1] == 1 && g.s[2] == 1 && g.p[0] == 0 &&
                    g.p[1] == 0 && g.p[2] == 0;
  if (g.Cg == 1 && g.Og == 1) {
    conv_depthwise(g, xc.data<float>(), wc.data<float>(), bp, yp);
  } else if (unit) {
    conv_pointwise(g, xc.data<float>(), wc.data<float>(), bp, yp);
  } else {
    conv_im2col(g, xc.data<float>(), wc.data<float>(), bp, yp);
  }
  return y;
}

Tensor conv_transpose_nd(const Tensor& x, const Tensor& w, const Tensor& bias,
                         const ops::ConvSpec& spec) {
  const Geom g = make_geom(x, w, spec, true);
  Tensor y = Tensor::empty(out_shape(g, spec.rank));
  if (y.numel() == 0) return y;
  const Tensor xc = x.contiguous(), wc = w.contiguous();
  const Tensor bc = bias.defined() ? bias.contiguous() : Tensor();
  const float* bp = bc.defined() ? bc.data<float>() : nullptr;
  float* yp = y.data<float>();
  if (g.Cg == 0 || g.Pin == 0) {
    for (int64_t no = 0; no < g.N * g.O; ++no) fill_bias(yp + no * g.Pout, g.Pout, bp, no % g.O);
    return y;
  }
  if (g.Cg == 1 && g.Og == 1) {
    conv_transpose_depthwise(g, xc.data<float>(), wc.data<float>(), bp, yp);
  } else {
    conv_transpose_gemm(g, xc.data<float>(), wc.data<float>(), bp, yp);
  }
  return y;
}

}  // namespace ltx::cpu
