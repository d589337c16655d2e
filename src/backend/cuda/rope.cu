#include "backend/cuda/rope.h"

#include "backend/cuda/elementwise_loop.cuh"

namespace ltx::cuda {

namespace {

using dtype_bits::add_rn;
using dtype_bits::mul_rn;

struct RopeArgs {
  int nd = 0;  // leading (row) dims
  int64_t size[kMaxDims] = {};
  int64_t xst[kMaxDims] = {}, cst[kMaxDims] = {}, sst[kMaxDims] = {};
  int64_t xs = 1, cs = 1, ss = 1;  // last-dim strides
  const void* x = nullptr;
  const void* c = nullptr;
  const void* s = nullptr;
  DType x_dtype = DType::F32, c_dtype = DType::F32, s_dtype = DType::F32;
  void* y = nullptr;
  int64_t d = 0;
  bool split = true;
};

// One thread per rotated pair.
__global__ void rope_kernel(RopeArgs a, int64_t pairs) {
  const int64_t half = a.d / 2;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < pairs;
       t += step) {
    const int64_t row = t / half, p = t % half;
    int64_t ox = 0, oc = 0, os = 0, rem = row;
    for (int k = a.nd - 1; k >= 0; --k) {
      const int64_t i = rem % a.size[k];
      rem /= a.size[k];
      ox += i * a.xst[k];
      oc += i * a.cst[k];
      os += i * a.sst[k];
    }
    const int64_t yo = row * a.d;
    if (a.split) {
      const float x1 = load_f32(a.x, a.x_dtype, ox + p * a.xs);
      const float x2 = load_f32(a.x, a.x_dtype, ox + (p + half) * a.xs);
      const float c = load_f32(a.c, a.c_dtype, oc + p * a.cs);
      const float s = load_f32(a.s, a.s_dtype, os + p * a.ss);
      store_f32(a.y, a.x_dtype, yo + p, add_rn(mul_rn(x1, c), -mul_rn(x2, s)));
      store_f32(a.y, a.x_dtype, yo + p + half, add_rn(mul_rn(x2, c), mul_rn(x1, s)));
    } else {
      const int64_t i = 2 * p;
      const float x0 = load_f32(a.x, a.x_dtype, ox + i * a.xs);
      const float x1 = load_f32(a.x, a.x_dtype, ox + (i + 1) * a.xs);
      const float c0 = load_f32(a.c, a.c_dtype, oc + i * a.cs);
      const float c1 = load_f32(a.c, a.c_dtype, oc + (i + 1) * a.cs);
      const float s0 = load_f32(a.s, a.s_dtype, os + i * a.ss);
      const float s1 = load_f32(a.s, a.s_dtype, os + (i + 1) * a.ss);
      store_f32(a.y, a.x_dtype, yo + i, add_rn(mul_rn(x0, c0), -mul_rn(x1, s0)));
      store_f32(a.y, a.x_dtype, yo + i + 1, add_rn(mul_rn(x1, c1), mul_rn(x0, s1)));
    }
  }
}

}  // namespace

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  RopeArgs a;
  a.nd = x.dim() - 1;
  for (int k = 0; k < a.nd; ++k) {
    a.size[k] = x.size(k);
    a.xst[k] = x.stride(k);
    a.cst[k] = cos.stride(k);
    a.sst[k] = sin.stride(k);
  }
  a.xs = x.stride(-1);
  a.cs = cos.stride(-1);
  a.ss = sin.stride(-1);
  a.x = x.raw_data();
  a.c = cos.raw_data();
  a.s = sin.raw_data();
  a.x_dtype = x.dtype();
  a.c_dtype = cos.dtype();
  a.s_dtype = sin.dtype();
  a.y = out.raw_data();
  a.d = x.size(-1);
  a.split = layout == ops::RopeLayout::Split;
  const int64_t pairs = x.numel() / 2;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  constexpr int kThreads = 256;
  rope_kernel<<<grid_for(pairs, kThreads, dev), kThreads, 0, current_stream(dev).handle()>>>(a,
                                                                                          pairs);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace ltx::cuda
