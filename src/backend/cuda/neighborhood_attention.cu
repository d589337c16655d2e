#include "backend/cuda/neighborhood_attention.h"

#include <algorithm>

#include "backend/cuda/device.h"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/stream.h"
#include "op_types/checks.h"
#include "op_types/neighborhood_attention.h"

namespace ltx::cuda {

namespace {

constexpr int64_t kSharedBytes = 48 * 1024;

struct NaArgs {
  const void *q, *k, *v;
  DType qt, kt, vt, ot;
  void* out;
  int64_t qs[6], ks[6], vs[6];
  int64_t B, T, H, W, NH, D, Dv;
  int64_t kern[3];  // clamped to the axis lengths
  float scale;
};

__device__ __forceinline__ int64_t window_start(int64_t i, int64_t len, int64_t k) {
  if (k >= len) return 0;
  const int64_t s = i - k / 2;
  return s < 0 ? 0 : (s > len - k ? len - k : s);
}

__global__ void na3d_kernel(NaArgs a, int64_t queries) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t nk = a.kern[0] * a.kern[1] * a.kern[2];
  float* s = smem + warp * nk;
  const int64_t qi = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + warp;
  if (qi >= queries) return;
  int64_t r = qi;
  const int64_t hd = r % a.NH;
  r /= a.NH;
  const int64_t wi = r % a.W;
  r /= a.W;
  const int64_t hi = r % a.H;
  r /= a.H;
  const int64_t ti = r % a.T;
  const int64_t b = r / a.T;
  const int64_t t0 = window_start(ti, a.T, a.kern[0]), h0 = window_start(hi, a.H, a.kern[1]),
                w0 = window_start(wi, a.W, a.kern[2]);
  const int64_t qoff = b * a.qs[0] + ti * a.qs[1] + hi * a.qs[2] + wi * a.qs[3] + hd * a.qs[4];
  // Keys in the reference's order: t outermost, w innermost.
  auto key_pos = [&](int64_t j, const int64_t* st) {
    const int64_t e = j % a.kern[2], c = (j / a.kern[2]) % a.kern[1],
                  t = j / (a.kern[1] * a.kern[2]);
    return b * st[0] + (t0 + t) * st[1] + (h0 + c) * st[2] + (w0 + e) * st[3] + hd * st[4];
  };
  float mx = -INFINITY;
  for (int64_t j = lane; j < nk; j += 32) {
    const int64_t koff = key_pos(j, a.ks);
    float dot = 0.f;
    for (int64_t x = 0; x < a.D; ++x)
      dot = fmaf(load_f32(a.q, a.qt, qoff + x * a.qs[5]), load_f32(a.k, a.kt, koff + x * a.ks[5]),
                 dot);
    const float sc = dot * a.scale;
    s[j] = sc;
    mx = fmaxf(mx, sc);
  }
  for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0.f;
  for (int64_t j = lane; j < nk; j += 32) {
    const float p = expf(s[j] - mx);
    s[j] = p;
    sum += p;
  }
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  __syncwarp();
  const float inv = 1.f / sum;
  const int64_t ooff = qi * a.Dv;
  for (int64_t x = lane; x < a.Dv; x += 32) {
    float acc = 0.f;
    for (int64_t j = 0; j < nk; ++j)
      acc = fmaf(s[j], load_f32(a.v, a.vt, key_pos(j, a.vs) + x * a.vs[5]), acc);
    store_f32(a.out, a.ot, ooff + x, acc * inv);
  }
}

}  // namespace

Tensor neighborhood_attention_3d(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const std::array<int64_t, 3>& kernel, float scale,
                                 NeighborhoodKernel which, const ops::QueryColumns& cols) {
  const int64_t col_count = cols.count < 0 ? q.size(3) - cols.begin : cols.count;
  const bool all_cols = cols.begin == 0 && col_count == q.size(3);
  const Device dev = q.device();
  DeviceGuard guard(dev.index);
  NaArgs a{};
  a.B = q.size(0);
  a.T = q.size(1);
  a.H = q.size(2);
  a.W = q.size(3);
  a.NH = q.size(4);
  a.D = q.size(5);
  a.Dv = v.size(5);
  a.kern[0] = std::min(kernel[0], a.T);
  a.kern[1] = std::min(kernel[1], a.H);
  a.kern[2] = std::min(kernel[2], a.W);
  const DType ot = ops::float_result_dtype({&q, &k, &v});
  const bool wgmma_asked = which == NeighborhoodKernel::Wgmma;
  const bool wgmma_ok = (which == NeighborhoodKernel::Auto || wgmma_asked) &&
                        wgmma_neighborhood_attention_applies(q, k, v, kernel);
  if (wgmma_asked || wgmma_ok) {
    // Only the requested columns are computed and allocated.
    Tensor out = Tensor::empty({a.B, a.T, a.H, col_count, a.NH, a.Dv}, ot, dev);
    if (out.numel() == 0) return out;
    LTX_CHECK(wgmma_ok,
              "neighborhood_attention_3d: the wgmma kernel needs a Hopper GPU (sm_90, binary built "
              "for sm_90a), bf16 q/k/v with head dim 64 (q and v), a dense head dim, 16-byte aligned "
              "rows and strides, and (4 + Kh - 1) x (4 + Kw - 1) <= 208 keys (clipped to H, W); got q ",
              q.describe(), ", v ", v.describe(), ", kernel ", kernel[0], "x", kernel[1], "x",
              kernel[2]);
    wgmma_neighborhood_attention(q, k, v, kernel, scale, {cols.begin, col_count}, out);
    return out;
  }
  if (!all_cols) {  // the other kernels compute every column
    return neighborhood_attention_3d(q, k, v, kernel, scale, which)
        .narrow(3, cols.begin, col_count)
        .contiguous();
  }
  Tensor out = Tensor::empty({a.B, a.T, a.H, a.W, a.NH, a.Dv}, ot, dev);
  if (out.numel() == 0) return out;
  const bool mma_ok = tensor_core_neighborhood_attention_applies(q, k, v, kernel);
  LTX_CHECK(which != NeighborhoodKernel::TensorCore || mma_ok,
            "neighborhood_attention_3d: the tensor-core kernel needs bf16 q/k/v with head dim 32, 64 "
            "or 128 (q and v alike), a dense head dim and 16-byte aligned rows on sm_80+; got q ",
            q.describe(), ", v ", v.describe());
  if (mma_ok && which != NeighborhoodKernel::Simple) {
    tensor_core_neighborhood_attention(q, k, v, kernel, scale, out);
    return out;
  }
  const int64_t nk = a.kern[0] * a.kern[1] * a.kern[2];
  const int64_t per_warp = nk * static_cast<int64_t>(sizeof(float));
  LTX_CHECK(per_warp <= kSharedBytes, "neighborhood_attention_3d: a window of ", nk,
            " keys does not fit the CUDA kernel's shared memory (at most ",
            kSharedBytes / sizeof(float), " keys); use a smaller kernel or the CPU");
  const int warps = static_cast<int>(std::clamp<int64_t>(kSharedBytes / per_warp, 1, 4));
  a.q = q.raw_data();
  a.k = k.raw_data();
  a.v = v.raw_data();
  a.qt = q.dtype();
  a.kt = k.dtype();
  a.vt = v.dtype();
  a.ot = ot;
  a.out = out.raw_data();
  for (int d = 0; d < 6; ++d) {
    a.qs[d] = q.stride(d);
    a.ks[d] = k.stride(d);
    a.vs[d] = v.stride(d);
  }
  a.scale = scale;
  const int64_t queries = a.B * a.T * a.H * a.W * a.NH;
  const int64_t blocks = (queries + warps - 1) / warps;
  const Stream stream = current_stream(dev.index);
  na3d_kernel<<<static_cast<unsigned>(blocks), warps * 32, static_cast<size_t>(warps * per_warp),
                stream.handle()>>>(a, queries);
  LTX_CUDA_CHECK(cudaGetLastError());
  return out;
}

}  // namespace ltx::cuda
