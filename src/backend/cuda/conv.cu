#include "backend/cuda/conv.h"

#include "backend/cuda/conv_cudnn.h"

#include <algorithm>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/linalg.h"
#include "backend/cuda/stream.h"
#include "op_types/checks.h"

namespace ltx::cuda {

namespace {

// Upper bound on one im2col tile (elements); 64 Mi elements = 256 MB in f32.
constexpr int64_t kMaxTileElements = int64_t{1} << 26;

// A conv problem with its spatial dims padded to three (D, H, W) by leading size-1 dims.
struct Geom {
  int64_t C, Cg, in[3], out[3], k[3], s[3], p[3], d[3];
};

// col[p, c * taps + t] = x[n, c0 + c, pos(p0 + p) * s - p + k(t) * d] (0 outside the input).
__global__ void im2col_kernel(const void* x, DType xt, void* col, DType ct, Geom g, int64_t x_off,
                              int64_t p0, int64_t rows, int64_t total) {
  const int64_t taps = g.k[0] * g.k[1] * g.k[2];
  const int64_t width = g.Cg * taps;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t r = i / width, j = i % width;
    const int64_t c = j / taps, t = j % taps;
    const int64_t kw = t % g.k[2], kh = (t / g.k[2]) % g.k[1], kd = t / (g.k[1] * g.k[2]);
    const int64_t pos = p0 + r;
    const int64_t ow = pos % g.out[2], oh = (pos / g.out[2]) % g.out[1],
                  od = pos / (g.out[1] * g.out[2]);
    const int64_t id = od * g.s[0] - g.p[0] + kd * g.d[0];
    const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.d[1];
    const int64_t iw = ow * g.s[2] - g.p[2] + kw * g.d[2];
    float v = 0.f;
    if (id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2])
      v = load_f32(x, xt, x_off + ((c * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw);
    store_f32(col, ct, i, v);
  }
  (void)rows;
}

}  // namespace

Tensor conv_nd(const Tensor& x, const Tensor& w, const Tensor& bias, const ops::ConvSpec& spec) {
  // bf16: cuDNN's tensor-core convolutions (conv_cudnn.h); f32 (parity runs) and anything cuDNN
  // does not take: im2col + cuBLASLt below.
  if (cudnn_conv_applies(x, w, bias, spec)) return cudnn_conv_nd(x, w, bias, spec);
  const Device dev = x.device();
  DeviceGuard guard(dev.index);
  const int R = spec.rank;
  const DType ct = ops::float_result_dtype({&x, &w});
  const DType out_t = ops::float_result_dtype({&x, &w, &bias});
  const Tensor xc = x.contiguous();
  const ops::ConvGeometry cg = ops::conv_geometry(x, w, spec, false);
  const int64_t N = cg.N, C = cg.C, G = cg.G, O = cg.O, Og = cg.Og;
  Geom g{};
  g.C = C;
  g.Cg = cg.Cg;
  for (int a = 0; a < 3; ++a) {
    g.in[a] = cg.in[a];
    g.out[a] = cg.out[a];
    g.k[a] = cg.k[a];
    g.s[a] = cg.s[a];
    g.p[a] = cg.p[a];
    g.d[a] = cg.d[a];
  }
  const Shape out_shape = ops::conv_output_shape(cg, R);
  const int64_t P = g.out[0] * g.out[1] * g.out[2];
  const int64_t Pin = g.in[0] * g.in[1] * g.in[2];
  const int64_t width = g.Cg * g.k[0] * g.k[1] * g.k[2];
  Tensor out = Tensor::empty(out_shape, out_t, dev);
  if (out.numel() == 0) return out;
  const Tensor out3 = out.view({N, O, P});
  // [O, C/G * taps] rows of each group are contiguous.
  const Tensor wf = w.to(ct).contiguous().view({O, width});
  const int64_t tile = std::max<int64_t>(1, std::min<int64_t>(P, kMaxTileElements / width));
  Tensor col = Tensor::empty({tile, width}, ct, dev);
  const Stream stream = current_stream(dev.index);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t gi = 0; gi < G; ++gi) {
      const Tensor wg = wf.narrow(0, gi * Og, Og);
      for (int64_t p0 = 0; p0 < P; p0 += tile) {
        const int64_t rows = std::min(tile, P - p0);
        const Tensor cv = col.narrow(0, 0, rows);
        const int64_t total = rows * width;
        im2col_kernel<<<grid_for(total, 256, dev.index), 256, 0, stream.handle()>>>(
            xc.raw_data(), xc.dtype(), cv.raw_data(), ct, g, (n * C + gi * g.Cg) * Pin, p0, rows,
            total);
        LTX_CUDA_CHECK(cudaGetLastError());
        // [Og, width] @ [rows, width]^T = [Og, rows]: the output's layout for this slab.
        const Tensor y = linear(wg, cv, Tensor());
        out3.select(0, n).narrow(0, gi * Og, Og).narrow(1, p0, rows).copy_from(y);
      }
    }
  }
  if (bias.defined()) {
    Shape bs = out_shape;  // [1, O, 1, ...]
    for (int i = 0; i < bs.size(); ++i) bs[i] = i == 1 ? O : 1;
    binary_inplace(ops::BinaryOp::Add, out, bias.view(bs));
  }
  return out;
}

}  // namespace ltx::cuda
