#include "backend/cuda/resample.h"

#include "backend/common/interp_tables.h"
#include "backend/common/scalar_math.h"
#include "backend/cuda/device.h"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/shape.h"
#include "backend/cuda/stream.h"

namespace ltx::cuda {

namespace {

struct Dims3 {
  int64_t in[3], out[3];
};

// Output element i of a [C, D, H, W] output as (channel, d, h, w).
struct OutPos {
  int64_t c, d, h, w;
};
__device__ __forceinline__ OutPos out_position(int64_t i, const Dims3& g) {
  return {i / (g.out[0] * g.out[1] * g.out[2]), (i / (g.out[1] * g.out[2])) % g.out[0],
          (i / g.out[2]) % g.out[1], i % g.out[2]};
}

// The resampling kernels' grid-stride loop over the `total` output elements: f(i, o, base) with
// o = out_position(i) and base the first input element of o's channel.
template <typename F>
__device__ __forceinline__ void for_each_output(const Dims3& g, int64_t total, F&& f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const OutPos o = out_position(i, g);
    f(i, o, o.c * in_plane);
  }
}

// Per axis (D, H, W): i0, i1 (int64) and w0, w1 (f32), each `out[axis]` long.
struct LinearTables {
  const int64_t* i0[3];
  const int64_t* i1[3];
  const float* w0[3];
  const float* w1[3];
};

__global__ void linear_kernel(const void* x, DType xt, void* y, DType yt, Dims3 g, LinearTables t,
                              int64_t total) {
  for_each_output(g, total, [&](int64_t i, const OutPos& o, int64_t base) {
    const int64_t od = o.d, oh = o.h, ow = o.w;
    const int64_t d0i = t.i0[0][od], d1i = t.i1[0][od], h0i = t.i0[1][oh], h1i = t.i1[1][oh];
    const int64_t a = t.i0[2][ow], b = t.i1[2][ow];
    const float d0 = t.w0[0][od], d1 = t.w1[0][od], h0 = t.w0[1][oh], h1 = t.w1[1][oh];
    const float w0 = t.w0[2][ow], w1 = t.w1[2][ow];
    auto row = [&](int64_t id, int64_t ih) { return base + (id * g.in[1] + ih) * g.in[2]; };
    auto lerp_w = [&](int64_t r) {
      return dtype_bits::add_rn(dtype_bits::mul_rn(w0, load_f32(x, xt, r + a)), dtype_bits::mul_rn(w1, load_f32(x, xt, r + b)));
    };
    // The CPU's expression, each operation rounded on its own.
    const float v = dtype_bits::add_rn(
        dtype_bits::mul_rn(d0, dtype_bits::add_rn(dtype_bits::mul_rn(h0, lerp_w(row(d0i, h0i))), dtype_bits::mul_rn(h1, lerp_w(row(d0i, h1i))))),
        dtype_bits::mul_rn(d1, dtype_bits::add_rn(dtype_bits::mul_rn(h0, lerp_w(row(d1i, h0i))), dtype_bits::mul_rn(h1, lerp_w(row(d1i, h1i))))));
    store_f32(y, yt, i, v);
  });
}

struct AreaTables {
  const int64_t* start[3];
  const int64_t* end[3];
};

__global__ void area_kernel(const void* x, DType xt, void* y, DType yt, Dims3 g, AreaTables t,
                            int64_t total) {
  for_each_output(g, total, [&](int64_t i, const OutPos& o, int64_t base) {
    const int64_t od = o.d, oh = o.h, ow = o.w;
    float sum = 0.f;
    for (int64_t id = t.start[0][od]; id < t.end[0][od]; ++id)
      for (int64_t ih = t.start[1][oh]; ih < t.end[1][oh]; ++ih)
        for (int64_t iw = t.start[2][ow]; iw < t.end[2][ow]; ++iw)
          sum = dtype_bits::add_rn(sum, load_f32(x, xt, base + (id * g.in[1] + ih) * g.in[2] + iw));
    const int64_t count = (t.end[0][od] - t.start[0][od]) * (t.end[1][oh] - t.start[1][oh]) *
                          (t.end[2][ow] - t.start[2][ow]);
    store_f32(y, yt, i, __fdiv_rn(sum, static_cast<float>(count)));
  });
}

template <typename T>
Tensor upload(const std::vector<T>& v, Device dev) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}).to(dev);
}

}  // namespace

Tensor interpolate(const Tensor& x, const std::vector<int64_t>& output_size,
                   const std::vector<double>& scales, ops::InterpMode mode, bool align_corners) {
  const Device dev = x.device();
  DeviceGuard guard(dev.index);
  if (mode == ops::InterpMode::Nearest || mode == ops::InterpMode::NearestExact)
    return gather_by_maps(
        x, interp::nearest_maps(x, output_size, scales, mode == ops::InterpMode::NearestExact), 0.0);
  const int R = x.dim() - 2;
  Dims3 g{};
  for (int a = 0; a < 3; ++a) g.in[a] = g.out[a] = 1;
  for (int i = 0; i < R; ++i) {
    g.in[3 - R + i] = x.size(2 + i);
    g.out[3 - R + i] = output_size[i];
  }
  Shape out_shape = {x.size(0), x.size(1)};
  for (int i = 0; i < R; ++i) out_shape.push_back(output_size[i]);
  const Tensor xc = x.contiguous();
  Tensor y = Tensor::empty(out_shape, x.dtype(), dev);
  const int64_t total = y.numel();
  if (total == 0) return y;
  const Stream stream = current_stream(dev.index);
  const unsigned grid = grid_for(total, 256, dev.index);
  std::vector<Tensor> keep;  // device tables, alive until the kernel is enqueued (stream-ordered)
  if (mode == ops::InterpMode::Linear) {
    LinearTables t{};
    for (int a = 0; a < 3; ++a) {
      const int i = a - (3 - R);
      const interp::LinearTaps taps = interp::linear_taps(
          g.in[a], g.out[a], align_corners, i >= 0 && !scales.empty() ? scales[i] : 0.0);
      keep.push_back(upload(taps.i0, dev));
      t.i0[a] = keep.back().data<int64_t>();
      keep.push_back(upload(taps.i1, dev));
      t.i1[a] = keep.back().data<int64_t>();
      keep.push_back(upload(taps.w0, dev));
      t.w0[a] = keep.back().data<float>();
      keep.push_back(upload(taps.w1, dev));
      t.w1[a] = keep.back().data<float>();
    }
    linear_kernel<<<grid, 256, 0, stream.handle()>>>(xc.raw_data(), xc.dtype(), y.raw_data(),
                                                     y.dtype(), g, t, total);
  } else {
    AreaTables t{};
    for (int a = 0; a < 3; ++a) {
      std::vector<int64_t> st, en;
      interp::area_windows(g.in[a], g.out[a], &st, &en);
      keep.push_back(upload(st, dev));
      t.start[a] = keep.back().data<int64_t>();
      keep.push_back(upload(en, dev));
      t.end[a] = keep.back().data<int64_t>();
    }
    area_kernel<<<grid, 256, 0, stream.handle()>>>(xc.raw_data(), xc.dtype(), y.raw_data(),
                                                   y.dtype(), g, t, total);
  }
  LTX_CUDA_CHECK(cudaGetLastError());
  return y;
}

}  // namespace ltx::cuda
