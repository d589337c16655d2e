// cudnn_conv_engines_probe.cpp -- does cuDNN's backend (graph) API offer faster engines than the
// legacy cudnnFindConvolutionForwardAlgorithm for the video VAE decoder's 3-D bf16 convolutions?
//
// Standalone experiment tool (CUDA runtime + cuDNN only; raw backend C API, no cudnn-frontend).
// nvcc is required (small kernels fill the inputs, compare outputs and, for -f, add bias and
// residual on the device):
//   nvcc -std=c++17 -O2 -x cu -arch=sm_90a -Xcompiler -Wall,-Wextra tools/bench/cudnn_conv_engines_probe.cpp -lcudnn -o /tmp/probe
//   (add -I/-L for cuDNN if it is not next to the CUDA toolkit, e.g. -I/usr/include -L/usr/lib/x86_64-linux-gnu)
//
// Usage: /tmp/probe [-v] [-n] [-s] [-f] [-k TOP] [-t SEC] [-T SEC] < geoms.txt
//   stdin : one conv per line "N C D H W O kD kH kW padD padH padW calls"; '#' lines and empty
//           lines are skipped. stride 1, dilation 1, groups 1, cross-correlation; x, w, y are bf16
//           channels-last (NDHWC, weights O kD kH kW C), fp32 accumulation. `calls` only weights
//           the summary.
//   -v    : verbose, one line per candidate (also PROBE_VERBOSE=1)
//   -n    : skip engines that need runtime compilation (NVRTC at plan finalize, can be slow);
//           conv candidates only, -f's fused graph always allows them
//   -s    : knob sweep (see below)
//   -f    : fused epilogue (see below)
//   -k    : backend configs listed per geometry (default 5)
//   -t    : wall-clock budget per geometry for the backend candidates (default 90 s; -f gets a
//           second budget of the same length for its fused candidates)
//   -T    : wall-clock budget for the whole run (default 540 s); later geometries are skipped so
//           that the SUMMARY line is still printed
//
// First run of -s and -f on the H200 (session 15, bench/RESULTS.md): the sweep found no config
// faster than the heuristics' engine 62 picks on the decode's two heaviest geometries, and the
// runtime-fused conv + bias + skip (engine 4, runtime-compiled) was slower than conv + epilogue.
//
// Per geometry: legacy cudnnFind picks its fastest algorithm (workspace <= 2 GiB), which is
// re-timed here (2 warm-ups + median of 5, cudaEvents). Then every engine config offered by the
// backend -- heuristics modes A, B, FALLBACK (all results) and every global engine index with
// default knobs -- is planned, timed the same way and checked against the legacy output
// (relative L2 > 1e-2 => BAD, not eligible). Candidate names are "e<global index>[knob=value,..]"
// (no knob list = the engine's default knobs); src letters: A/B/F heuristics mode, G global
// enumeration, S knob sweep; {notes}: tc tensor cores, dc down-converts inputs, rp
// reduced-precision reduction, fft, wino, nd non-deterministic, rtc runtime-compiled.
//
// -s: after those candidates, the best 2 (by time, not BAD) are swept one knob at a time: for each
// knob the engine reports (CUDNN_ATTR_ENGINE_KNOB_INFO), every value min..max by stride (at most
// 16, evenly spaced), the other knobs as in the base config. Configs that finalize are timed and
// checked like the others (same budget, src S) and ranked in the same list and the summary.
// -f: per geometry also the graph conv(X, W) -> +bias[O] -> +residual R -> Y (virtual fp32
// intermediates, bf16 bias/R/Y), heuristics A, B, FALLBACK, timed like the others; checked
// against the legacy conv output + bias + R in fp32 with one final bf16 rounding (rel L2 > 1e-2
// => BAD) and also compared with the two-rounding composition that an unfused pipeline stores
// (conv -> bf16, + bias -> bf16, + R -> bf16); the unfused cost is legacy conv + a simple
// bias+residual kernel (timed the same way).
//
// Output (stdout; concise, the SUMMARY line is last):
//   geom N C D H W O kDxkHxkW pPDxPHxPW calls=.. legacy_algo=A legacy_ms=X best_backend=NAME
//        backend_ms=Y speedup=X/Y candidates=K ok=.. bad=.. fail=.. slow=.. skipped=..
//        [sweep_cfgs=.. sweep_rejected=..]                        (-s: configs built/rejected)
//     #1 Y ms NAME src=.. ws=..M rel=.. {notes}         (top configs, BAD ones marked)
//   fused geom ... conv_ms=A epilogue_ms=B unfused_total=A+B fused_best=C speedup=(A+B)/C
//        engine=NAME rtc=0/1 build_s=.. rel_vs_one_rounding=.. rel_vs_two_roundings=..
//        unfused_rel_vs_one=.. cands=.. ok=.. bad=.. fail=.. slow=..   (-f; build_s = plan
//        finalize wall time, NVRTC included; on failure fused_best=none and the reason)
//   SUMMARY geoms=G weighted(calls) legacy_ms=.. best_backend_ms=.. ratio=.. best_of_both_ms=.. ratio=..
//        [sweep_wins=..] [fused_geoms=.. fused_with_plan=.. unfused_weighted_ms=..
//        fused_weighted_ms=.. fused_ratio=..]  (-s: geoms whose best is a swept config; -f:
//        fused_weighted uses the unfused time where no fused plan was usable)
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../src/backend/cuda/cudnn_knob_names.h"

namespace {

constexpr int64_t kWsCap = int64_t(2) << 30;  // workspace limit for legacy and backend alike
constexpr double kBadRelL2 = 1e-2;            // correctness threshold vs the legacy output
constexpr float kSlowFactor = 20.f;           // warm-up slower than this x legacy => skip engine

bool g_verbose = false;
bool g_cuda_dead = false;  // a sticky CUDA error (e.g. an engine faulted): stop, print summary
std::string g_err;         // reason of the last soft cuDNN failure (for verbose skip lines)

// cuDNN status string plus cuDNN's own last-error message (one line, truncated).
std::string cudnn_msg(cudnnStatus_t s) {
  std::string m = cudnnGetErrorString(s);
  char buf[1024] = {0};
  cudnnGetLastErrorString(buf, sizeof buf);
  std::string detail(buf);
  for (char& ch : detail)
    if (ch == '\n' || ch == '\r') ch = ' ';
  if (detail.size() > 160) detail = detail.substr(0, 160) + "...";
  if (!detail.empty()) m += " [" + detail + "]";
  return m;
}

std::string where(cudnnStatus_t s, const char* call, const char* file, int line) {
  std::string c(call);
  if (c.size() > 70) c = c.substr(0, 70) + "...";
  return cudnn_msg(s) + " at " + file + ":" + std::to_string(line) + " (" + c + ")";
}

}  // namespace

// Fatal checks (setup that cannot fail sensibly): print status string + file:line and exit.
#define CUDA_FATAL(call)                                                                      \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      std::printf("FATAL cuda %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, \
                  #call);                                                                     \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#define CUDNN_FATAL(call)                                                            \
  do {                                                                               \
    cudnnStatus_t s_ = (call);                                                       \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                \
      std::printf("FATAL cudnn %s\n", where(s_, #call, __FILE__, __LINE__).c_str()); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)
// Soft check inside a bool function: record the reason in g_err and return false, so that one
// failing candidate (or geometry) never aborts the run.
#define CUDNN_TRY(call)                             \
  do {                                              \
    cudnnStatus_t s_ = (call);                      \
    if (s_ != CUDNN_STATUS_SUCCESS) {               \
      g_err = where(s_, #call, __FILE__, __LINE__); \
      return false;                                 \
    }                                               \
  } while (0)

namespace {

// ---------------------------------------------------------------------------------------------
// Small RAII helpers
// ---------------------------------------------------------------------------------------------

// Owns one backend descriptor (move-only) so early returns do not leak.
struct BD {
  cudnnBackendDescriptor_t d = nullptr;
  BD() = default;
  explicit BD(cudnnBackendDescriptorType_t t) {
    if (cudnnBackendCreateDescriptor(t, &d) != CUDNN_STATUS_SUCCESS) d = nullptr;
  }
  ~BD() { reset(); }
  BD(BD&& o) noexcept : d(o.d) { o.d = nullptr; }
  BD& operator=(BD&& o) noexcept {
    if (this != &o) {
      reset();
      d = o.d;
      o.d = nullptr;
    }
    return *this;
  }
  BD(const BD&) = delete;
  BD& operator=(const BD&) = delete;
  void reset() {
    if (d) cudnnBackendDestroyDescriptor(d);
    d = nullptr;
  }
};

template <class F>
struct Defer {
  F f;
  ~Defer() { f(); }
};
template <class F>
Defer<F> defer(F f) {
  return Defer<F>{f};
}

// Device buffer that only grows (workspace); a failed allocation leaves it empty.
struct DevBuf {
  void* p = nullptr;
  size_t n = 0;
  bool ensure(size_t need) {
    if (need <= n && p) return true;
    if (p) cudaFree(p);
    p = nullptr;
    n = 0;
    if (cudaMalloc(&p, std::max<size_t>(need, 1)) != cudaSuccess) {
      cudaGetLastError();  // clear the (non-sticky) allocation error
      p = nullptr;
      return false;
    }
    n = need;
    return true;
  }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// ---------------------------------------------------------------------------------------------
// Device kernels: input fill and output comparison (on the device: y can be 100M+ elements and
// there can be ~100 candidates per geometry, so host copies would dominate the run time).
// ---------------------------------------------------------------------------------------------

__global__ void fill_kernel(__nv_bfloat16* p, size_t n, uint32_t seed) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u ^ uint32_t(i >> 32) * 0x85EBCA77u ^ seed;
    h ^= h >> 16;
    h *= 0x7FEB352Du;
    h ^= h >> 15;
    h *= 0x846CA68Bu;
    h ^= h >> 16;
    p[i] = __float2bfloat16(float(h >> 8) * (2.0f / 16777216.0f) - 1.0f);  // uniform [-1, 1)
  }
}

// sums[0] += sum (a-ref)^2, sums[1] += sum ref^2, max_bits = max |a-ref| as float bits (a NaN
// anywhere propagates into both, which then fails the rel-L2 check).
__global__ void diff_kernel(const __nv_bfloat16* a, const __nv_bfloat16* ref, size_t n,
                            double* sums, unsigned* max_bits) {
  __shared__ double s_d[256], s_r[256];
  __shared__ unsigned s_m[256];
  double d2 = 0, r2 = 0;
  unsigned m = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float x = __bfloat162float(a[i]), r = __bfloat162float(ref[i]), d = x - r;
    d2 += double(d) * d;
    r2 += double(r) * r;
    m = max(m, __float_as_uint(fabsf(d)));
  }
  const unsigned t = threadIdx.x;
  s_d[t] = d2;
  s_r[t] = r2;
  s_m[t] = m;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) {
      s_d[t] += s_d[t + s];
      s_r[t] += s_r[t + s];
      s_m[t] = max(s_m[t], s_m[t + s]);
    }
    __syncthreads();
  }
  if (t == 0) {
    atomicAdd(&sums[0], s_d[0]);
    atomicAdd(&sums[1], s_r[0]);
    atomicMax(max_bits, s_m[0]);
  }
}

unsigned grid_for(size_t n) { return unsigned(std::min<size_t>((n + 255) / 256, 4096)); }

void fill_random(void* p, size_t n, uint32_t seed) {
  fill_kernel<<<grid_for(n), 256>>>(static_cast<__nv_bfloat16*>(p), n, seed);
  CUDA_FATAL(cudaGetLastError());
}

// Relative L2 and max abs difference of y vs ref (n bf16 elements each).
bool compare(const void* y, const void* ref, size_t n, double* rel, double* maxabs) {
  static void* scratch = nullptr;  // 2 doubles + 1 unsigned, allocated once
  if (!scratch) CUDA_FATAL(cudaMalloc(&scratch, 32));
  double* sums = static_cast<double*>(scratch);
  unsigned* mx = reinterpret_cast<unsigned*>(sums + 2);
  CUDA_FATAL(cudaMemset(scratch, 0, 32));
  diff_kernel<<<grid_for(n), 256>>>(static_cast<const __nv_bfloat16*>(y),
                                    static_cast<const __nv_bfloat16*>(ref), n, sums, mx);
  double h[2];
  unsigned hm = 0;
  if (cudaMemcpy(h, sums, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(&hm, mx, sizeof hm, cudaMemcpyDeviceToHost) != cudaSuccess) {
    g_cuda_dead = true;
    return false;
  }
  float fm;
  std::memcpy(&fm, &hm, sizeof fm);
  *rel = h[1] > 0 ? std::sqrt(h[0] / h[1]) : std::sqrt(h[0]);
  *maxabs = fm;
  return true;
}

// -f epilogue: out = y + bias[c] + r (channels-last, so c = index % C), rounded to bf16 either
// once (the fused reference) or after each add (what unfused conv -> add -> add stores).
template <bool kTwo>
__device__ __forceinline__ __nv_bfloat16 epi_one(__nv_bfloat16 y, __nv_bfloat16 b,
                                                 __nv_bfloat16 r) {
  const float s = __bfloat162float(y) + __bfloat162float(b);
  if (kTwo) return __float2bfloat16(__bfloat162float(__float2bfloat16(s)) + __bfloat162float(r));
  return __float2bfloat16(s + __bfloat162float(r));
}

// 8 channels per thread with 16-byte loads (C % 8 == 0): the unfused baseline should be a fair,
// memory-bound kernel, not one dominated by a per-element modulo.
template <bool kTwo>
__global__ void epilogue8_kernel(const uint4* y, const __nv_bfloat16* bias, const uint4* r,
                                 uint4* out, uint32_t n8, uint32_t c) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
    const uint4 yv = y[i], rv = r[i], bv = *reinterpret_cast<const uint4*>(bias + (i * 8u) % c);
    __nv_bfloat16 ye[8], re[8], be[8], oe[8];
    memcpy(ye, &yv, 16);
    memcpy(re, &rv, 16);
    memcpy(be, &bv, 16);
    for (int j = 0; j < 8; ++j) oe[j] = epi_one<kTwo>(ye[j], be[j], re[j]);
    uint4 ov;
    memcpy(&ov, oe, 16);
    out[i] = ov;
  }
}

template <bool kTwo>
__global__ void epilogue1_kernel(const __nv_bfloat16* y, const __nv_bfloat16* bias,
                                 const __nv_bfloat16* r, __nv_bfloat16* out, uint32_t n,
                                 uint32_t c) {
  const uint32_t stride = gridDim.x * blockDim.x;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = epi_one<kTwo>(y[i], bias[i % c], r[i]);
}

// n < 2^31 (geometries past that are skipped), so 32-bit indices suffice.
void epilogue(const void* y, const void* bias, const void* r, void* out, size_t n, int64_t c,
              bool two) {
  using B = __nv_bfloat16;
  const auto* yb = static_cast<const B*>(y);
  const auto* bb = static_cast<const B*>(bias);
  const auto* rb = static_cast<const B*>(r);
  auto* ob = static_cast<B*>(out);
  if (c % 8 == 0) {
    const uint32_t n8 = uint32_t(n / 8);
    const auto* y8 = static_cast<const uint4*>(y);
    const auto* r8 = static_cast<const uint4*>(r);
    auto* o8 = static_cast<uint4*>(out);
    if (two)
      epilogue8_kernel<true><<<grid_for(n8), 256>>>(y8, bb, r8, o8, n8, uint32_t(c));
    else
      epilogue8_kernel<false><<<grid_for(n8), 256>>>(y8, bb, r8, o8, n8, uint32_t(c));
  } else if (two) {
    epilogue1_kernel<true><<<grid_for(n), 256>>>(yb, bb, rb, ob, uint32_t(n), uint32_t(c));
  } else {
    epilogue1_kernel<false><<<grid_for(n), 256>>>(yb, bb, rb, ob, uint32_t(n), uint32_t(c));
  }
}

// ---------------------------------------------------------------------------------------------
// Timing: 2 warm-ups + median of 5, each call bracketed by cudaEvents on the default stream
// (both the legacy handle and the backend plans run on it).
// ---------------------------------------------------------------------------------------------

cudaEvent_t g_ev0, g_ev1;

template <class F>
bool timed_call(F& fn, float* ms, std::string* why) {
  cudaEventRecord(g_ev0);
  const cudnnStatus_t s = fn();
  cudaEventRecord(g_ev1);
  const cudaError_t ce = cudaEventSynchronize(g_ev1);
  if (ce != cudaSuccess) {  // an engine faulted: the context is most likely unusable now
    std::printf("CUDA error during execution: %s -- stopping\n", cudaGetErrorString(ce));
    g_cuda_dead = true;
    *why = "cuda error";
    return false;
  }
  if (s != CUDNN_STATUS_SUCCESS) {
    *why = "execute: " + cudnn_msg(s);
    return false;
  }
  cudaEventElapsedTime(ms, g_ev0, g_ev1);
  return true;
}

// Returns the median ms, -1 on failure, -2 if a warm-up exceeded limit_ms (the first warm-up
// gets 200 ms of slack: it may include lazy module loading).
template <class F>
float bench(F fn, float limit_ms, std::string* why) {
  float t = 0;
  for (int i = 0; i < 2; ++i) {
    if (!timed_call(fn, &t, why)) return -1;
    if (t > limit_ms + (i == 0 ? 200.f : 0.f)) {
      char b[96];
      std::snprintf(b, sizeof b, "warm-up %d took %.3f ms > limit %.3f ms", i, t, limit_ms);
      *why = b;
      return -2;
    }
  }
  float v[5];
  for (float& x : v)
    if (!timed_call(fn, &x, why)) return -1;
  std::sort(v, v + 5);
  return v[2];
}

// ---------------------------------------------------------------------------------------------
// Geometry and buffers
// ---------------------------------------------------------------------------------------------

struct Geom {
  int64_t n, c, d, h, w, o, kd, kh, kw, pd, ph, pw;
  double calls;
  int64_t od, oh, ow;  // output spatial size (stride 1, dilation 1)
  size_t x_elems() const { return size_t(n * c * d * h * w); }
  size_t w_elems() const { return size_t(o * c * kd * kh * kw); }
  size_t y_elems() const { return size_t(n * o * od * oh * ow); }
  // Logical dims (N, C, D, H, W order) and channels-last strides.
  void x_layout(int64_t dims[5], int64_t st[5]) const { layout(n, c, d, h, w, dims, st); }
  void w_layout(int64_t dims[5], int64_t st[5]) const { layout(o, c, kd, kh, kw, dims, st); }
  void y_layout(int64_t dims[5], int64_t st[5]) const { layout(n, o, od, oh, ow, dims, st); }
  static void layout(int64_t a, int64_t b, int64_t p, int64_t q, int64_t r, int64_t dims[5],
                     int64_t st[5]) {
    dims[0] = a, dims[1] = b, dims[2] = p, dims[3] = q, dims[4] = r;
    st[1] = 1;          // C fastest
    st[4] = b;          // W
    st[3] = r * b;      // H
    st[2] = q * r * b;  // D
    st[0] = p * q * r * b;
  }
};

bool parse_geom(const std::string& line, Geom* g) {
  std::istringstream is(line);
  if (!(is >> g->n >> g->c >> g->d >> g->h >> g->w >> g->o >> g->kd >> g->kh >> g->kw >> g->pd >>
        g->ph >> g->pw >> g->calls))
    return false;
  g->od = g->d + 2 * g->pd - g->kd + 1;
  g->oh = g->h + 2 * g->ph - g->kh + 1;
  g->ow = g->w + 2 * g->pw - g->kw + 1;
  return g->n > 0 && g->c > 0 && g->d > 0 && g->h > 0 && g->w > 0 && g->o > 0 && g->kd > 0 &&
         g->kh > 0 && g->kw > 0 && g->pd >= 0 && g->ph >= 0 && g->pw >= 0 && g->od > 0 &&
         g->oh > 0 && g->ow > 0;
}

struct Bufs {
  void *x = nullptr, *w = nullptr, *y = nullptr, *yref = nullptr;
  size_t ny = 0;
  ~Bufs() {
    for (void* p : {x, w, y, yref})
      if (p) cudaFree(p);
  }
};

// ---------------------------------------------------------------------------------------------
// Legacy API: cudnnFind + own timing; leaves the reference output in b.yref.
// ---------------------------------------------------------------------------------------------

struct Legacy {
  int algo = -1;
  float ms = -1;
  size_t ws = 0;
};

bool run_legacy(cudnnHandle_t h, const Geom& g, Bufs& b, DevBuf& ws, Legacy* out) {
  int64_t d64[5], s64[5];
  int xd_[5], xs_[5], yd_[5], ys_[5], wd_[5];
  g.x_layout(d64, s64);
  for (int i = 0; i < 5; ++i) xd_[i] = int(d64[i]), xs_[i] = int(s64[i]);
  g.y_layout(d64, s64);
  for (int i = 0; i < 5; ++i) yd_[i] = int(d64[i]), ys_[i] = int(s64[i]);
  g.w_layout(d64, s64);
  for (int i = 0; i < 5; ++i) wd_[i] = int(d64[i]);
  const int pad[3] = {int(g.pd), int(g.ph), int(g.pw)}, one[3] = {1, 1, 1};

  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnFilterDescriptor_t wd = nullptr;
  cudnnConvolutionDescriptor_t cd = nullptr;
  auto cleanup = defer([&] {
    if (xd) cudnnDestroyTensorDescriptor(xd);
    if (yd) cudnnDestroyTensorDescriptor(yd);
    if (wd) cudnnDestroyFilterDescriptor(wd);
    if (cd) cudnnDestroyConvolutionDescriptor(cd);
  });
  CUDNN_TRY(cudnnCreateTensorDescriptor(&xd));
  CUDNN_TRY(cudnnCreateTensorDescriptor(&yd));
  CUDNN_TRY(cudnnCreateFilterDescriptor(&wd));
  CUDNN_TRY(cudnnCreateConvolutionDescriptor(&cd));
  CUDNN_TRY(cudnnSetTensorNdDescriptor(xd, CUDNN_DATA_BFLOAT16, 5, xd_, xs_));
  CUDNN_TRY(cudnnSetTensorNdDescriptor(yd, CUDNN_DATA_BFLOAT16, 5, yd_, ys_));
  CUDNN_TRY(cudnnSetFilterNdDescriptor(wd, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, 5, wd_));
  CUDNN_TRY(cudnnSetConvolutionNdDescriptor(cd, 3, pad, one, one, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT));
  CUDNN_TRY(cudnnSetConvolutionMathType(cd, CUDNN_TENSOR_OP_MATH));

  int od[5] = {0};  // sanity: cuDNN's output shape must match ours
  CUDNN_TRY(cudnnGetConvolutionNdForwardOutputDim(cd, xd, wd, 5, od));
  for (int i = 0; i < 5; ++i)
    if (od[i] != yd_[i]) {
      g_err = "output dim mismatch vs cudnnGetConvolutionNdForwardOutputDim";
      return false;
    }

  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int got = 0;
  CUDNN_TRY(cudnnFindConvolutionForwardAlgorithm(h, xd, wd, cd, yd,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf));
  int pick = -1;
  for (int i = 0; i < got; ++i) {
    if (g_verbose)
      std::printf("    legacy find: algo=%d status=%d find_ms=%.4f ws=%.1fM math=%d\n",
                  int(perf[i].algo), int(perf[i].status), perf[i].time, perf[i].memory / 1048576.0,
                  int(perf[i].mathType));
    if (perf[i].status == CUDNN_STATUS_SUCCESS && int64_t(perf[i].memory) <= kWsCap &&
        (pick < 0 || perf[i].time < perf[pick].time))
      pick = i;
  }
  if (pick < 0) {
    g_err = "cudnnFind returned no usable algorithm";
    return false;
  }
  // Run with the math type cudnnFind measured it with (as frameworks do).
  CUDNN_TRY(cudnnSetConvolutionMathType(cd, perf[pick].mathType));
  if (!ws.ensure(perf[pick].memory)) {
    g_err = "cannot allocate legacy workspace";
    return false;
  }
  const float alpha = 1.f, beta = 0.f;
  const cudnnConvolutionFwdAlgo_t algo = perf[pick].algo;
  const size_t ws_size = perf[pick].memory;
  std::string why;
  const float ms = bench(
      [&] {
        return cudnnConvolutionForward(h, &alpha, xd, b.x, wd, b.w, cd, algo, ws.p, ws_size, &beta,
                                       yd, b.y);
      },
      1e30f, &why);
  if (ms < 0) {
    g_err = "legacy run: " + why;
    return false;
  }
  CUDA_FATAL(cudaMemcpy(b.yref, b.y, b.ny * 2, cudaMemcpyDeviceToDevice));
  out->algo = int(algo);
  out->ms = ms;
  out->ws = ws_size;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Backend API: operation graph with one convolution-forward op.
// ---------------------------------------------------------------------------------------------

// -f adds bias, residual (real) and the two virtual intermediates.
enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3, kUidB = 4, kUidR = 5, kUidY0 = 6, kUidY1 = 7 };

bool make_tensor(BD& t, int64_t uid, const int64_t dims[5], const int64_t strides[5],
                 cudnnDataType_t dt = CUDNN_DATA_BFLOAT16, bool is_virtual = false) {
  t = BD(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  if (!t.d) {
    g_err = "create tensor descriptor";
    return false;
  }
  const int64_t align = 16;
  CUDNN_TRY(cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  CUDNN_TRY(
      cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
  CUDNN_TRY(cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 5, dims));
  CUDNN_TRY(cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 5, strides));
  CUDNN_TRY(
      cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  if (is_virtual)  // set only when true: the plain conv graph's tensors stay exactly as before
    CUDNN_TRY(cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1,
                                       &is_virtual));
  CUDNN_TRY(cudnnBackendFinalize(t.d));
  return true;
}

// Convolution descriptor + forward op writing y (bf16 for the plain graph, fp32 virtual for -f).
bool make_conv_op(const Geom& g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t w,
                  cudnnBackendDescriptor_t y, BD* conv, BD* op) {
  *conv = BD(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t spatial = 3, pad[3] = {g.pd, g.ph, g.pw}, one[3] = {1, 1, 1};
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  CUDNN_TRY(cudnnBackendSetAttribute(conv->d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64,
                                     1, &spatial));
  CUDNN_TRY(cudnnBackendSetAttribute(conv->d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
                                     CUDNN_TYPE_DATA_TYPE, 1, &comp));
  CUDNN_TRY(cudnnBackendSetAttribute(conv->d, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                                     CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  CUDNN_TRY(cudnnBackendSetAttribute(conv->d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 3,
                                     one));
  CUDNN_TRY(cudnnBackendSetAttribute(conv->d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES,
                                     CUDNN_TYPE_INT64, 3, one));
  CUDNN_TRY(cudnnBackendSetAttribute(conv->d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64,
                                     3, pad));
  CUDNN_TRY(cudnnBackendSetAttribute(conv->d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS,
                                     CUDNN_TYPE_INT64, 3, pad));
  CUDNN_TRY(cudnnBackendFinalize(conv->d));

  // alpha/beta are host floats because the compute type is float (double only for double).
  *op = BD(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.f, beta = 0.f;
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv->d));
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                     CUDNN_TYPE_FLOAT, 1, &alpha));
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                                     CUDNN_TYPE_FLOAT, 1, &beta));
  CUDNN_TRY(cudnnBackendFinalize(op->d));
  return true;
}

// The HANDLE attribute is deprecated in recent cuDNN 9 but still accepted, and the runtime on
// the target machine (9.14) may predate it being optional.
bool make_op_graph(cudnnHandle_t h, const std::vector<cudnnBackendDescriptor_t>& ops, BD* graph) {
  *graph = BD(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  CUDNN_TRY(cudnnBackendSetAttribute(graph->d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE,
                                     1, &h));
  CUDNN_TRY(cudnnBackendSetAttribute(graph->d, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops.size()),
                                     ops.data()));
  CUDNN_TRY(cudnnBackendFinalize(graph->d));
  return true;
}

// Everything the plans reference; must outlive them (kept for the whole geometry).
struct Graph {
  BD x, w, y, conv, op, graph;
};

bool build_graph(cudnnHandle_t h, const Geom& g, Graph* G) {
  int64_t dims[5], st[5];
  g.x_layout(dims, st);
  if (!make_tensor(G->x, kUidX, dims, st)) return false;
  g.w_layout(dims, st);
  if (!make_tensor(G->w, kUidW, dims, st)) return false;
  g.y_layout(dims, st);
  if (!make_tensor(G->y, kUidY, dims, st)) return false;
  if (!make_conv_op(g, G->x.d, G->w.d, G->y.d, &G->conv, &G->op)) return false;
  return make_op_graph(h, {G->op.d}, &G->graph);
}

// y = x + b with fp32 math (alpha1/alpha2 left at their default 1); one pointwise descriptor per
// op, nothing shared between ops.
bool make_pw_add(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y,
                 BD* pw, BD* op) {
  *pw = BD(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  const cudnnPointwiseMode_t mode = CUDNN_POINTWISE_ADD;
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  CUDNN_TRY(cudnnBackendSetAttribute(pw->d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1,
                                     &mode));
  CUDNN_TRY(cudnnBackendSetAttribute(pw->d, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1,
                                     &prec));
  CUDNN_TRY(cudnnBackendFinalize(pw->d));
  *op = BD(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw->d));
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b));
  CUDNN_TRY(cudnnBackendSetAttribute(op->d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
  CUDNN_TRY(cudnnBackendFinalize(op->d));
  return true;
}

// -f graph: conv(X, W) -> Y0 -> + B -> Y1 -> + R -> Y. The intermediates are fp32 virtual
// tensors, as in cuDNN's own conv-bias-act runtime-fusion samples; B is [1, O, 1, 1, 1]
// channels-last (stride 1 on C, O elsewhere) and broadcast by the add.
struct FusedGraph {
  BD x, w, y, b, r, y0, y1, conv, op_conv, pw_b, op_b, pw_r, op_r, graph;
};

bool build_fused_graph(cudnnHandle_t h, const Geom& g, FusedGraph* G) {
  int64_t dims[5], st[5];
  g.x_layout(dims, st);
  if (!make_tensor(G->x, kUidX, dims, st)) return false;
  g.w_layout(dims, st);
  if (!make_tensor(G->w, kUidW, dims, st)) return false;
  g.y_layout(dims, st);
  if (!make_tensor(G->y, kUidY, dims, st)) return false;
  if (!make_tensor(G->r, kUidR, dims, st)) return false;
  if (!make_tensor(G->y0, kUidY0, dims, st, CUDNN_DATA_FLOAT, true)) return false;
  if (!make_tensor(G->y1, kUidY1, dims, st, CUDNN_DATA_FLOAT, true)) return false;
  Geom::layout(1, g.o, 1, 1, 1, dims, st);
  if (!make_tensor(G->b, kUidB, dims, st)) return false;
  if (!make_conv_op(g, G->x.d, G->w.d, G->y0.d, &G->conv, &G->op_conv)) return false;
  if (!make_pw_add(G->y0.d, G->b.d, G->y1.d, &G->pw_b, &G->op_b)) return false;
  if (!make_pw_add(G->y1.d, G->r.d, G->y.d, &G->pw_r, &G->op_r)) return false;
  return make_op_graph(h, {G->op_conv.d, G->op_b.d, G->op_r.d}, &G->graph);
}

// ---------------------------------------------------------------------------------------------
// Candidate engine configs
// ---------------------------------------------------------------------------------------------

struct Cand {
  BD cfg;
  BD engine;  // keeps a self-built engine alive for its config (global enumeration)
  std::string name, src, notes;
  bool rtc = false;
};

struct CandSet {
  std::vector<Cand> v;
  std::unordered_map<std::string, size_t> by_name;  // dedup by "e<idx>[knobs]"
  std::vector<BD> keep;                             // heuristics descriptors kept alive
};

using Knobs = std::vector<std::pair<int, int64_t>>;  // (knob type, value), sorted by type

std::string knob_str(int type) {
  const char* kn = ltx::cuda::cudnn_knob_name(type);
  return kn ? std::string(kn) : "k" + std::to_string(type);
}

// Engine (a copy), its global index and the knob choices of a finalized engine config.
bool cfg_knobs(cudnnBackendDescriptor_t cfg, BD* eng, int64_t* idx, Knobs* knobs) {
  *eng = BD(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t cnt = 0;
  *idx = -1;
  CUDNN_TRY(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt, &eng->d));
  CUDNN_TRY(cudnnBackendGetAttribute(eng->d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                     &cnt, idx));

  // Knob choices are returned into pre-created KNOB_CHOICE descriptors.
  std::vector<BD> kc;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < int(CUDNN_KNOB_TYPE_COUNTS); ++i) {
    kc.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    raw.push_back(kc.back().d);
  }
  int64_t nk = 0;
  CUDNN_TRY(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(raw.size()), &nk,
                                     raw.data()));
  knobs->clear();
  for (int64_t i = 0; i < std::min<int64_t>(nk, int64_t(raw.size())); ++i) {
    cudnnBackendKnobType_t type = CUDNN_KNOB_TYPE_COUNTS;
    int64_t val = 0;
    CUDNN_TRY(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                       CUDNN_TYPE_KNOB_TYPE, 1, &cnt, &type));
    CUDNN_TRY(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                       CUDNN_TYPE_INT64, 1, &cnt, &val));
    knobs->emplace_back(int(type), val);
  }
  std::sort(knobs->begin(), knobs->end());  // canonical order for dedup
  return true;
}

// Engine global index, knob choices and notes of a finalized engine config.
bool describe_cfg(cudnnBackendDescriptor_t cfg, std::string* name, std::string* notes, bool* rtc) {
  BD eng;
  int64_t cnt = 0, idx = -1;
  Knobs knobs;
  if (!cfg_knobs(cfg, &eng, &idx, &knobs)) return false;
  *name = "e" + std::to_string(idx);
  if (!knobs.empty()) {
    *name += "[";
    for (size_t i = 0; i < knobs.size(); ++i)
      *name += (i ? "," : "") + knob_str(knobs[i].first) + "=" + std::to_string(knobs[i].second);
    *name += "]";
  }

  // Notes are informative only: failures to query them are ignored.
  notes->clear();
  *rtc = false;
  cudnnBackendNumericalNote_t nn[32];
  cnt = 0;
  if (cudnnBackendGetAttribute(eng.d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               32, &cnt, nn) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < std::min<int64_t>(cnt, 32); ++i) {
      switch (nn[i]) {
        case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
          *notes += "tc,";
          break;
        case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
          *notes += "dc,";
          break;
        case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
          *notes += "rp,";
          break;
        case CUDNN_NUMERICAL_NOTE_FFT:
          *notes += "fft,";
          break;
        case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
          *notes += "nd,";
          break;
        case CUDNN_NUMERICAL_NOTE_WINOGRAD:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6:
        case CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13:
          *notes += "wino,";
          break;
        default:
          break;
      }
    }
  }
  cudnnBackendBehaviorNote_t bn[32];
  cnt = 0;
  if (cudnnBackendGetAttribute(eng.d, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, 32,
                               &cnt, bn) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < std::min<int64_t>(cnt, 32); ++i) {
      if (bn[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) *notes += "rtc,", *rtc = true;
    }
  }
  if (!notes->empty()) notes->pop_back();
  return true;
}

// Adds a finalized config unless an identical one (same engine + knobs) is already there;
// true if it was added.
bool add_cand(CandSet& cs, BD cfg, BD engine, char src) {
  std::string name, notes;
  bool rtc = false;
  if (!describe_cfg(cfg.d, &name, &notes, &rtc)) {
    if (g_verbose) std::printf("    (cannot describe a config: %s)\n", g_err.c_str());
    name = "cfg?" + std::to_string(cs.v.size());  // still try it, under a unique name
  }
  auto it = cs.by_name.find(name);
  if (it != cs.by_name.end()) {
    std::string& s = cs.v[it->second].src;
    if (s.find(src) == std::string::npos) s += src;
    return false;
  }
  cs.by_name.emplace(name, cs.v.size());
  Cand c;
  c.cfg = std::move(cfg);
  c.engine = std::move(engine);
  c.name = std::move(name);
  c.notes = std::move(notes);
  c.src = std::string(1, src);
  c.rtc = rtc;
  cs.v.push_back(std::move(c));
  return true;
}

// All results of one heuristics mode (count queried first, then that many pre-created configs).
bool collect_heur(cudnnBackendDescriptor_t graph, cudnnBackendHeurMode_t mode, char tag,
                  CandSet& cs, int* added) {
  *added = 0;
  BD heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  CUDNN_TRY(cudnnBackendSetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
  CUDNN_TRY(
      cudnnBackendSetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  CUDNN_TRY(cudnnBackendFinalize(heur.d));
  int64_t count = 0;
  CUDNN_TRY(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  count = std::min<int64_t>(count, 512);
  if (count <= 0) return true;
  std::vector<BD> cfgs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(cfgs.back().d);
  }
  int64_t got = 0;
  CUDNN_TRY(cudnnBackendGetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()));
  const size_t before = cs.v.size();
  for (int64_t i = 0; i < std::min(got, count); ++i)
    add_cand(cs, std::move(cfgs[size_t(i)]), BD(), tag);
  *added = int(cs.v.size() - before);
  cs.keep.push_back(std::move(heur));
  return true;
}

// Engine `idx` for `graph`, finalized; false (g_err set) if it does not support the graph.
bool make_engine(cudnnBackendDescriptor_t graph, int64_t idx, BD* eng) {
  *eng = BD(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  CUDNN_TRY(cudnnBackendSetAttribute(eng->d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
  CUDNN_TRY(
      cudnnBackendSetAttribute(eng->d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &idx));
  CUDNN_TRY(cudnnBackendFinalize(eng->d));
  return true;
}

// Finalized config of `eng` with the given knob choices (empty: the engine's defaults). The
// choice descriptors go to `keep`: the config may refer to them, not copy them.
bool make_cfg(cudnnBackendDescriptor_t eng, const Knobs& knobs, std::vector<BD>& keep, BD* cfg) {
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const auto& k : knobs) {
    BD kc(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    const cudnnBackendKnobType_t type = cudnnBackendKnobType_t(k.first);
    const int64_t val = k.second;
    CUDNN_TRY(cudnnBackendSetAttribute(kc.d, CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE,
                                       1, &type));
    CUDNN_TRY(cudnnBackendSetAttribute(kc.d, CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                                       &val));
    CUDNN_TRY(cudnnBackendFinalize(kc.d));
    raw.push_back(kc.d);
    keep.push_back(std::move(kc));
  }
  *cfg = BD(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  CUDNN_TRY(cudnnBackendSetAttribute(cfg->d, CUDNN_ATTR_ENGINECFG_ENGINE,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &eng));
  if (!raw.empty())
    CUDNN_TRY(cudnnBackendSetAttribute(cfg->d, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(raw.size()),
                                       raw.data()));
  CUDNN_TRY(cudnnBackendFinalize(cfg->d));
  return true;
}

// Every global engine index with default knobs; unsupported engines fail finalize and are skipped.
void collect_global(cudnnBackendDescriptor_t graph, CandSet& cs, int64_t* total, int* supported,
                    int* added) {
  *total = 0;
  *supported = 0;
  *added = 0;
  int64_t cnt = 0;
  const cudnnStatus_t s = cudnnBackendGetAttribute(
      graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64, 1, &cnt, total);
  if (s != CUDNN_STATUS_SUCCESS) {
    std::printf("  global engine count query failed: %s\n", cudnn_msg(s).c_str());
    *total = 0;
    return;
  }
  const size_t before = cs.v.size();
  std::vector<BD> unused;  // default knobs: no choice descriptors
  for (int64_t i = 0; i < *total; ++i) {
    BD eng, cfg;
    if (!make_engine(graph, i, &eng) || !make_cfg(eng.d, {}, unused, &cfg)) continue;
    ++*supported;
    add_cand(cs, std::move(cfg), std::move(eng), 'G');
  }
  *added = int(cs.v.size() - before);
}

// ---------------------------------------------------------------------------------------------
// -s knob sweep
// ---------------------------------------------------------------------------------------------

struct KnobInfo {
  int type;
  int64_t lo, hi, stride;
};

// The engine's tunable knobs (returned into pre-created KNOB_INFO descriptors, as for choices).
bool engine_knob_info(cudnnBackendDescriptor_t eng, std::vector<KnobInfo>* out) {
  std::vector<BD> ki;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < int(CUDNN_KNOB_TYPE_COUNTS); ++i) {
    ki.emplace_back(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR);
    raw.push_back(ki.back().d);
  }
  int64_t n = 0, cnt = 0;
  CUDNN_TRY(cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_KNOB_INFO,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(raw.size()), &n,
                                     raw.data()));
  out->clear();
  for (int64_t i = 0; i < std::min<int64_t>(n, int64_t(raw.size())); ++i) {
    cudnnBackendKnobType_t type = CUDNN_KNOB_TYPE_COUNTS;
    KnobInfo k{};
    CUDNN_TRY(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_INFO_TYPE,
                                       CUDNN_TYPE_KNOB_TYPE, 1, &cnt, &type));
    CUDNN_TRY(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE,
                                       CUDNN_TYPE_INT64, 1, &cnt, &k.hi));
    CUDNN_TRY(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE,
                                       CUDNN_TYPE_INT64, 1, &cnt, &k.lo));
    CUDNN_TRY(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_INFO_STRIDE,
                                       CUDNN_TYPE_INT64, 1, &cnt, &k.stride));
    k.type = int(type);
    out->push_back(k);
  }
  return true;
}

constexpr uint64_t kSweepVals = 16;  // values tried per knob

// lo..hi by stride, evenly thinned to kSweepVals. Unsigned arithmetic: the range is whatever the
// engine reports (stride <= 0 is taken as 1), and nothing here may overflow.
std::vector<int64_t> knob_values(const KnobInfo& k) {
  std::vector<int64_t> v;
  if (k.hi < k.lo) return v;
  const uint64_t st = k.stride > 0 ? uint64_t(k.stride) : 1;
  const uint64_t steps = (uint64_t(k.hi) - uint64_t(k.lo)) / st;  // values = steps + 1
  const uint64_t n = std::min<uint64_t>(steps, kSweepVals - 1) + 1;
  for (uint64_t j = 0; j < n; ++j) {
    // The last value is the top of the range; thinned ones lie j/(n-1) of the way, which keeps
    // the double -> uint64 conversion in range.
    const uint64_t s = j == n - 1       ? steps
                       : n == steps + 1 ? j
                                        : uint64_t(double(j) * double(steps) / double(n - 1) + 0.5);
    v.push_back(int64_t(uint64_t(k.lo) + std::min(s, steps) * st));
  }
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// One-knob-at-a-time sweep around config cs.v[base]: a fresh engine of the same global index,
// each reported knob over knob_values(), the other knobs as chosen in the base config. Configs
// that finalize and are new go into cs with src 'S'; returns how many, *rejected counts the
// ones cuDNN refused at knob-choice or config finalize.
int add_sweep(cudnnBackendDescriptor_t graph, CandSet& cs, size_t base, int* rejected) {
  const std::string base_name = cs.v[base].name;  // copy: cs.v grows below
  BD eng0, eng;
  int64_t idx = -1;
  Knobs cur;
  std::vector<KnobInfo> info;
  if (!cfg_knobs(cs.v[base].cfg.d, &eng0, &idx, &cur) || !make_engine(graph, idx, &eng) ||
      !engine_knob_info(eng.d, &info)) {
    if (g_verbose) std::printf("    sweep %s: %s\n", base_name.c_str(), g_err.c_str());
    return 0;
  }
  const cudnnBackendDescriptor_t e = eng.d;
  cs.keep.push_back(std::move(eng));  // shared by all configs of this sweep
  int added = 0, rej = 0;
  std::string desc;  // verbose only: knob ranges and the base's choice
  for (const KnobInfo& k : info) {
    const auto it = std::find_if(cur.begin(), cur.end(), [&](const std::pair<int, int64_t>& c) {
      return c.first == k.type;
    });
    if (g_verbose)
      desc += " " + knob_str(k.type) + "[" + std::to_string(k.lo) + ".." + std::to_string(k.hi) +
              "/" + std::to_string(k.stride) + "]" +
              (it != cur.end() ? "=" + std::to_string(it->second) : "");
    for (const int64_t v : knob_values(k)) {
      if (it != cur.end() && it->second == v) continue;  // that is the base config itself
      Knobs knobs = cur;
      const auto jt =
          std::find_if(knobs.begin(), knobs.end(),
                       [&](const std::pair<int, int64_t>& c) { return c.first == k.type; });
      if (jt != knobs.end())
        jt->second = v;
      else
        knobs.emplace_back(k.type, v);
      std::sort(knobs.begin(), knobs.end());
      BD cfg;
      if (!make_cfg(e, knobs, cs.keep, &cfg)) {
        ++rej;
        continue;
      }
      if (add_cand(cs, std::move(cfg), BD(), 'S')) ++added;
    }
  }
  if (g_verbose)
    std::printf("    sweep %s: knobs%s -> %d new configs, %d rejected\n", base_name.c_str(),
                desc.empty() ? " none" : desc.c_str(), added, rej);
  *rejected += rej;
  return added;
}

// ---------------------------------------------------------------------------------------------
// Evaluation of one candidate
// ---------------------------------------------------------------------------------------------

struct Res {
  std::string name, src, notes;
  float ms = -1;
  double rel = NAN, maxabs = NAN;
  double rel2 = NAN;   // -f: vs the two-rounding composition
  double build_s = 0;  // plan finalize wall time (NVRTC included for rtc engines)
  int64_t ws = 0;
  bool bad = false, rtc = false;
  bool planned = false;  // the execution plan finalized
};

// What a plan reads and writes: variant-pack uids and pointers, its output and the reference
// that output is checked against (n bf16 elements each).
struct Io {
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  void* y = nullptr;
  const void* yref = nullptr;
  size_t ny = 0;
};

enum class Outcome { kOk, kSkipWs, kSkipRtc, kFail, kSlow };

Outcome eval_cand(cudnnHandle_t h, Cand& c, const Io& io, DevBuf& ws, float limit_ms, bool skip_rtc,
                  Res* r, std::string* why) {
  r->name = c.name;
  r->src = c.src;
  r->notes = c.notes;
  r->rtc = c.rtc;
  if (skip_rtc && c.rtc) {
    *why = "runtime-compiled engine (-n)";
    return Outcome::kSkipRtc;
  }
  int64_t cnt = 0, ws_cfg = 0;
  if (cudnnBackendGetAttribute(c.cfg.d, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                               &cnt, &ws_cfg) != CUDNN_STATUS_SUCCESS)
    ws_cfg = 0;  // not known before the plan exists; the plan's value is checked below
  if (ws_cfg > kWsCap) {
    *why = "workspace " + std::to_string(ws_cfg >> 20) + " MiB > 2 GiB";
    return Outcome::kSkipWs;
  }

  BD plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  cudnnStatus_t s;
  const Clock::time_point tb = Clock::now();  // finalize is where runtime compilation happens
  if ((s = cudnnBackendSetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                    &h)) != CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendSetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c.cfg.d)) !=
          CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendFinalize(plan.d)) != CUDNN_STATUS_SUCCESS) {
    *why = "plan: " + cudnn_msg(s);
    return Outcome::kFail;
  }
  r->build_s = seconds_since(tb);
  r->planned = true;
  int64_t ws_plan = 0;
  if (cudnnBackendGetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64,
                               1, &cnt, &ws_plan) != CUDNN_STATUS_SUCCESS)
    ws_plan = ws_cfg;
  r->ws = std::max(ws_cfg, ws_plan);
  if (r->ws > kWsCap) {
    *why = "workspace " + std::to_string(r->ws >> 20) + " MiB > 2 GiB";
    return Outcome::kSkipWs;
  }
  if (!ws.ensure(size_t(r->ws))) {
    *why = "cannot allocate workspace " + std::to_string(r->ws >> 20) + " MiB";
    return Outcome::kSkipWs;
  }

  BD vp(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  const int64_t np = int64_t(io.uids.size());
  void* wsp = ws.p;
  if ((s = cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, np,
                                    io.uids.data())) != CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                    CUDNN_TYPE_VOID_PTR, np, io.ptrs.data())) !=
          CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                    &wsp)) != CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendFinalize(vp.d)) != CUDNN_STATUS_SUCCESS) {
    *why = "variant pack: " + cudnn_msg(s);
    return Outcome::kFail;
  }

  // Poison y (bf16 NaN) so an engine that silently writes nothing fails the check.
  CUDA_FATAL(cudaMemset(io.y, 0xFF, io.ny * 2));
  const float ms = bench([&] { return cudnnBackendExecute(h, plan.d, vp.d); }, limit_ms, why);
  if (ms == -2) return Outcome::kSlow;
  if (ms < 0) return Outcome::kFail;
  r->ms = ms;
  if (!compare(io.y, io.yref, io.ny, &r->rel, &r->maxabs)) {
    *why = "compare failed";
    return Outcome::kFail;
  }
  r->bad = !(r->rel <= kBadRelL2);  // NaN counts as bad
  return Outcome::kOk;
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

struct Totals {
  int geoms = 0, with_backend = 0, skipped = 0;
  double legacy = 0, backend = 0, best_of_both = 0;  // sum of calls * ms
  int sweep_wins = 0;                                // -s: best backend config is a swept one
  int fused_geoms = 0, fused_with_plan = 0;          // -f
  double unfused = 0, fused = 0;                     // -f: sum of calls * ms
};

struct Opts {
  bool skip_rtc = false, sweep = false, fused = false;
  int top_k = 5;
  double geom_budget_s = 90;
};

// -f: conv + bias + residual as one cuDNN graph vs legacy conv + a two-rounding epilogue kernel.
// Prints the "fused geom" line. False if nothing could be measured (the geometry then stays out
// of the fused totals); *fused_ms < 0 when no fused config was usable.
bool run_fused(cudnnHandle_t h, const Geom& g, const char* gname, Bufs& b, const Legacy& L,
               DevBuf& ws, Clock::time_point deadline, double* unfused_ms, double* fused_ms) {
  struct FBufs {
    void *bias = nullptr, *r = nullptr, *ref1 = nullptr, *ref2 = nullptr;
    ~FBufs() {
      for (void* p : {bias, r, ref1, ref2})
        if (p) cudaFree(p);
    }
  } f;
  *fused_ms = -1;
  if (cudaMalloc(&f.bias, size_t(g.o) * 2) != cudaSuccess ||
      cudaMalloc(&f.r, b.ny * 2) != cudaSuccess || cudaMalloc(&f.ref1, b.ny * 2) != cudaSuccess ||
      cudaMalloc(&f.ref2, b.ny * 2) != cudaSuccess) {
    cudaGetLastError();
    std::printf("fused %s skipped: out of device memory\n", gname);
    return false;
  }
  fill_random(f.bias, size_t(g.o), 0xB1A5u);
  fill_random(f.r, b.ny, 0x5E5Du);

  // Both references start from the legacy conv output (bf16): ref1 rounds once (the check),
  // ref2 after each add -- it is what the timed unfused epilogue kernel writes.
  epilogue(b.yref, f.bias, f.r, f.ref1, b.ny, g.o, false);
  CUDA_FATAL(cudaGetLastError());
  std::string why;
  const float epi_ms = bench(
      [&] {
        epilogue(b.yref, f.bias, f.r, f.ref2, b.ny, g.o, true);
        return cudaGetLastError() == cudaSuccess ? CUDNN_STATUS_SUCCESS
                                                 : CUDNN_STATUS_EXECUTION_FAILED;
      },
      1e30f, &why);
  if (epi_ms < 0) {
    std::printf("fused %s epilogue kernel FAILED: %s\n", gname, why.c_str());
    return false;
  }
  double unf_rel = NAN, mx = NAN;
  if (!compare(f.ref2, f.ref1, b.ny, &unf_rel, &mx)) {
    std::printf("fused %s reference compare FAILED\n", gname);
    return false;
  }
  *unfused_ms = double(L.ms) + epi_ms;
  char head[512];
  std::snprintf(head, sizeof head, "fused %s conv_ms=%.4f epilogue_ms=%.4f unfused_total=%.4f",
                gname, L.ms, epi_ms, *unfused_ms);

  FusedGraph G;
  if (!build_fused_graph(h, g, &G)) {
    std::printf("%s fused_best=none unfused_rel_vs_one=%.1e graph FAILED: %s\n", head, unf_rel,
                g_err.c_str());
    return true;
  }
  CandSet cs;
  std::string last_err, heur_failed;
  const struct {
    cudnnBackendHeurMode_t mode;
    char tag;
  } modes[] = {{CUDNN_HEUR_MODE_A, 'A'}, {CUDNN_HEUR_MODE_B, 'B'}, {CUDNN_HEUR_MODE_FALLBACK, 'F'}};
  for (const auto& m : modes) {
    int added = 0;
    if (!collect_heur(G.graph.d, m.mode, m.tag, cs, &added)) {
      heur_failed += m.tag;
      last_err = "heuristics " + std::string(1, m.tag) + ": " + g_err;
    }
    if (g_verbose)
      std::printf("    fused heuristics %c: %s\n", m.tag,
                  heur_failed.find(m.tag) != std::string::npos
                      ? ("failed: " + g_err).c_str()
                      : (std::to_string(added) + " new configs").c_str());
  }

  // Runtime-compiled engines are the point here (runtime fusion), so -n does not apply.
  const Io io{{kUidX, kUidW, kUidB, kUidR, kUidY}, {b.x, b.w, f.bias, f.r, b.y}, b.y, f.ref1, b.ny};
  const float limit_ms = kSlowFactor * float(*unfused_ms);
  std::vector<Res> ok;
  int n_fail = 0, n_slow = 0, n_skip = 0, n_budget = 0, n_planned = 0;
  for (Cand& c : cs.v) {
    if (g_cuda_dead) break;
    if (Clock::now() > deadline) {
      ++n_budget;
      continue;
    }
    Res r;
    std::string cwhy;
    const Outcome o = eval_cand(h, c, io, ws, limit_ms, false, &r, &cwhy);
    if (r.planned) ++n_planned;
    if (o == Outcome::kOk) {
      if (!compare(b.y, f.ref2, b.ny, &r.rel2, &mx)) r.rel2 = NAN;
      ok.push_back(r);
    } else {
      last_err = cwhy;
      if (o == Outcome::kFail)
        ++n_fail;
      else if (o == Outcome::kSlow)
        ++n_slow;
      else
        ++n_skip;
    }
    if (g_verbose) {
      if (o == Outcome::kOk)
        std::printf(
            "    fused cand %-40s src=%-3s ms=%.4f build_s=%.2f ws=%.1fM rel=%.2e rel2=%.2e "
            "{%s}%s\n",
            r.name.c_str(), r.src.c_str(), r.ms, r.build_s, r.ws / 1048576.0, r.rel, r.rel2,
            r.notes.c_str(), r.bad ? " BAD" : "");
      else
        std::printf("    fused cand %-40s src=%-3s build_s=%.2f {%s} skip: %s\n", r.name.c_str(),
                    r.src.c_str(), r.build_s, r.notes.c_str(), cwhy.c_str());
    }
  }

  std::sort(ok.begin(), ok.end(), [](const Res& a, const Res& b2) { return a.ms < b2.ms; });
  const Res* best = nullptr;
  int n_bad = 0;
  for (const Res& r : ok) {
    if (r.bad)
      ++n_bad;
    else if (!best)
      best = &r;
  }
  char counts[256];
  std::snprintf(counts, sizeof counts, " cands=%zu ok=%zu bad=%d fail=%d slow=%d skipped=%d%s%s",
                cs.v.size(), ok.size(), n_bad, n_fail, n_slow, n_skip,
                n_budget ? (" budget_cut=" + std::to_string(n_budget)).c_str() : "",
                heur_failed.empty() ? "" : (" heur_failed=" + heur_failed).c_str());
  if (best) {
    *fused_ms = best->ms;
    std::printf(
        "%s fused_best=%.4f speedup=%.3f engine=%s rtc=%d build_s=%.2f rel_vs_one_rounding=%.1e "
        "rel_vs_two_roundings=%.1e unfused_rel_vs_one=%.1e%s\n",
        head, best->ms, *unfused_ms / best->ms, best->name.c_str(), best->rtc ? 1 : 0,
        best->build_s, best->rel, best->rel2, unf_rel, counts);
  } else {
    if (last_err.empty()) last_err = cs.v.empty() ? "heuristics returned no configs" : "-";
    std::printf("%s fused_best=none unfused_rel_vs_one=%.1e%s %s; last error: %s\n", head, unf_rel,
                counts,
                n_planned ? "no fused config usable (planned ones BAD/slow/failed)"
                          : "no fused plan finalized",
                last_err.c_str());
  }
  return true;
}

void run_geom(cudnnHandle_t h, const Geom& g, DevBuf& ws, const Opts& opt,
              Clock::time_point deadline, Clock::time_point run_deadline, Totals& tot) {
  char gname[256];
  std::snprintf(gname, sizeof gname,
                "geom %lld %lld %lld %lld %lld %lld k%lldx%lldx%lld p%lldx%lldx%lld calls=%g",
                (long long)g.n, (long long)g.c, (long long)g.d, (long long)g.h, (long long)g.w,
                (long long)g.o, (long long)g.kd, (long long)g.kh, (long long)g.kw, (long long)g.pd,
                (long long)g.ph, (long long)g.pw, g.calls);
  if (g_verbose) std::printf("-- %s\n", gname);  // verbose detail lines follow, result line last
  if (g.x_elems() >= (size_t(1) << 31) || g.y_elems() >= (size_t(1) << 31)) {
    std::printf("%s skipped: tensor >= 2^31 elements (legacy API limit)\n", gname);
    return;
  }
  Bufs b;
  b.ny = g.y_elems();
  if (cudaMalloc(&b.x, g.x_elems() * 2) != cudaSuccess ||
      cudaMalloc(&b.w, g.w_elems() * 2) != cudaSuccess ||
      cudaMalloc(&b.y, b.ny * 2) != cudaSuccess || cudaMalloc(&b.yref, b.ny * 2) != cudaSuccess) {
    cudaGetLastError();
    std::printf("%s skipped: out of device memory\n", gname);
    return;
  }
  fill_random(b.x, g.x_elems(), 0x1234u);
  fill_random(b.w, g.w_elems(), 0xBEEFu);

  Legacy L;
  if (!run_legacy(h, g, b, ws, &L)) {
    std::printf("%s legacy FAILED: %s\n", gname, g_err.c_str());
    return;
  }

  Graph G;
  CandSet cs;
  std::vector<Res> ok;
  int n_fail = 0, n_slow = 0, n_skip = 0, n_budget = 0;
  int n_sweep = 0, n_sweep_rej = 0;  // -s
  std::string heur_failed;           // tags of heuristics modes that failed
  const Io io{{kUidX, kUidW, kUidY}, {b.x, b.w, b.y}, b.y, b.yref, b.ny};
  const float limit_ms = kSlowFactor * L.ms;
  // Times cs.v[first..]; the sweep appends candidates and calls this again.
  auto eval_from = [&](size_t first) {
    for (size_t i = first; i < cs.v.size(); ++i) {
      Cand& c = cs.v[i];
      if (g_cuda_dead) break;
      if (Clock::now() > deadline) {
        ++n_budget;
        continue;
      }
      Res r;
      std::string why;
      const Outcome o = eval_cand(h, c, io, ws, limit_ms, opt.skip_rtc, &r, &why);
      switch (o) {
        case Outcome::kOk:
          ok.push_back(r);
          break;
        case Outcome::kFail:
          ++n_fail;
          break;
        case Outcome::kSlow:
          ++n_slow;
          break;
        default:
          ++n_skip;
          break;
      }
      if (g_verbose) {
        if (o == Outcome::kOk)
          std::printf("    cand %-40s src=%-3s ms=%.4f ws=%.1fM rel=%.2e max=%.3g {%s}%s\n",
                      r.name.c_str(), r.src.c_str(), r.ms, r.ws / 1048576.0, r.rel, r.maxabs,
                      r.notes.c_str(), r.bad ? " BAD" : "");
        else
          std::printf("    cand %-40s src=%-3s skip: %s\n", r.name.c_str(), r.src.c_str(),
                      why.c_str());
      }
    }
  };
  if (!build_graph(h, g, &G)) {
    std::printf("  backend graph FAILED: %s\n", g_err.c_str());
  } else {
    const struct {
      cudnnBackendHeurMode_t mode;
      char tag;
    } modes[] = {
        {CUDNN_HEUR_MODE_A, 'A'}, {CUDNN_HEUR_MODE_B, 'B'}, {CUDNN_HEUR_MODE_FALLBACK, 'F'}};
    for (const auto& m : modes) {
      int added = 0;
      if (!collect_heur(G.graph.d, m.mode, m.tag, cs, &added)) {
        heur_failed += m.tag;  // reported compactly on the geom line
        if (g_verbose) std::printf("    heuristics %c failed: %s\n", m.tag, g_err.c_str());
      } else if (g_verbose) {
        std::printf("    heuristics %c: %d new configs\n", m.tag, added);
      }
    }
    int64_t gtotal = 0;
    int gsup = 0, gadded = 0;
    collect_global(G.graph.d, cs, &gtotal, &gsup, &gadded);
    if (g_verbose)
      std::printf("    global engines: %lld, %d support this graph, %d new configs\n",
                  (long long)gtotal, gsup, gadded);

    eval_from(0);

    if (opt.sweep && !g_cuda_dead) {
      // Bases: the 2 fastest correct configs so far (names copied: ok grows below).
      std::vector<std::pair<float, std::string>> good;
      for (const Res& r : ok)
        if (!r.bad) good.emplace_back(r.ms, r.name);
      std::sort(good.begin(), good.end());
      const size_t first = cs.v.size();
      for (size_t i = 0; i < good.size() && i < 2; ++i) {
        const auto it = cs.by_name.find(good[i].second);
        if (it != cs.by_name.end()) n_sweep += add_sweep(G.graph.d, cs, it->second, &n_sweep_rej);
      }
      eval_from(first);
    }
  }

  std::sort(ok.begin(), ok.end(), [](const Res& a, const Res& b2) { return a.ms < b2.ms; });
  const Res* best = nullptr;
  int n_bad = 0;
  for (const Res& r : ok) {
    if (r.bad)
      ++n_bad;
    else if (!best)
      best = &r;
  }
  std::string extra;  // only present when something unusual happened
  if (n_budget) extra += " budget_cut=" + std::to_string(n_budget);
  if (!heur_failed.empty()) extra += " heur_failed=" + heur_failed;
  if (opt.sweep)
    extra +=
        " sweep_cfgs=" + std::to_string(n_sweep) + " sweep_rejected=" + std::to_string(n_sweep_rej);
  if (best)
    std::printf(
        "%s legacy_algo=%d legacy_ms=%.4f best_backend=%s backend_ms=%.4f speedup=%.3f "
        "candidates=%zu ok=%zu bad=%d fail=%d slow=%d skipped=%d%s\n",
        gname, L.algo, L.ms, best->name.c_str(), best->ms, L.ms / best->ms, cs.v.size(), ok.size(),
        n_bad, n_fail, n_slow, n_skip, extra.c_str());
  else
    std::printf(
        "%s legacy_algo=%d legacy_ms=%.4f best_backend=none backend_ms=nan speedup=nan "
        "candidates=%zu ok=%zu bad=%d fail=%d slow=%d skipped=%d%s\n",
        gname, L.algo, L.ms, cs.v.size(), ok.size(), n_bad, n_fail, n_slow, n_skip, extra.c_str());
  for (int i = 0; i < int(ok.size()) && i < opt.top_k; ++i) {
    const Res& r = ok[size_t(i)];
    std::printf("  #%d %.4f ms %s src=%s ws=%.1fM rel=%.1e {%s}%s\n", i + 1, r.ms, r.name.c_str(),
                r.src.c_str(), r.ws / 1048576.0, r.rel, r.notes.c_str(), r.bad ? " BAD" : "");
  }
  std::fflush(stdout);

  ++tot.geoms;
  tot.legacy += g.calls * L.ms;
  const double bms = best ? best->ms : L.ms;  // no usable backend config: keep legacy
  if (best) ++tot.with_backend;
  tot.backend += g.calls * bms;
  tot.best_of_both += g.calls * std::min<double>(L.ms, bms);
  if (best && best->src.find('S') != std::string::npos) ++tot.sweep_wins;

  if (opt.fused && !g_cuda_dead) {
    // Its own -t budget (fused plans may compile for seconds each), within the run's -T.
    const auto fdl = std::min(run_deadline,
                              Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(opt.geom_budget_s)));
    double unf = 0, fus = -1;
    if (run_fused(h, g, gname, b, L, ws, fdl, &unf, &fus)) {
      ++tot.fused_geoms;
      if (fus > 0) ++tot.fused_with_plan;
      tot.unfused += g.calls * unf;
      tot.fused += g.calls * (fus > 0 ? fus : unf);  // no usable fused plan: stay unfused
    }
    std::fflush(stdout);
  }
}

void usage() {
  std::printf(
      "usage: probe [-v] [-n] [-s] [-f] [-k TOP] [-t SEC_PER_GEOM] [-T SEC_TOTAL] < geoms\n"
      "  stdin lines: N C D H W O kD kH kW padD padH padW calls\n");
}

}  // namespace

int main(int argc, char** argv) {
  Opts opt;
  double total_budget_s = 540;
  if (const char* e = std::getenv("PROBE_VERBOSE")) g_verbose = e[0] && e[0] != '0';
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&](double* v) {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      *v = std::atof(argv[++i]);
    };
    if (a == "-v") {
      g_verbose = true;
    } else if (a == "-n") {
      opt.skip_rtc = true;
    } else if (a == "-s") {
      opt.sweep = true;
    } else if (a == "-f") {
      opt.fused = true;
    } else if (a == "-k") {
      double k = 0;
      next(&k);
      opt.top_k = int(k);
    } else if (a == "-t") {
      next(&opt.geom_budget_s);
    } else if (a == "-T") {
      next(&total_budget_s);
    } else {
      usage();
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }

  std::vector<Geom> geoms;
  std::string line;
  int lineno = 0;
  while (std::getline(std::cin, line)) {
    ++lineno;
    const size_t p = line.find_first_not_of(" \t\r");
    if (p == std::string::npos || line[p] == '#') continue;
    Geom g{};
    if (!parse_geom(line, &g)) {
      std::printf("# line %d ignored (need 13 numbers, valid shape): %s\n", lineno, line.c_str());
      continue;
    }
    geoms.push_back(g);
  }
  if (geoms.empty()) {
    usage();
    return 2;
  }

  const Clock::time_point t0 = Clock::now();
  CUDA_FATAL(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CUDA_FATAL(cudaGetDeviceProperties(&prop, 0));
  cudnnHandle_t h;
  CUDNN_FATAL(cudnnCreate(&h));
  CUDA_FATAL(cudaEventCreate(&g_ev0));
  CUDA_FATAL(cudaEventCreate(&g_ev1));
  std::printf(
      "# %s (sm_%d%d, %d SMs), cuDNN runtime %zu (headers %d), %zu geometries, "
      "budget %.0f s/geom %.0f s total%s%s%s\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, cudnnGetVersion(), CUDNN_VERSION,
      geoms.size(), opt.geom_budget_s, total_budget_s,
      opt.skip_rtc ? ", skipping runtime-compiled engines" : "", opt.sweep ? ", knob sweep" : "",
      opt.fused ? ", fused epilogue" : "");

  DevBuf ws;  // shared workspace, grows to the largest request (<= 2 GiB)
  Totals tot;
  for (const Geom& g : geoms) {
    if (g_cuda_dead) {
      ++tot.skipped;
      continue;
    }
    const double left = total_budget_s - seconds_since(t0);
    if (left <= 0) {
      ++tot.skipped;
      continue;
    }
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(std::min(opt.geom_budget_s, left)));
    const auto run_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(left));
    run_geom(h, g, ws, opt, deadline, run_deadline, tot);
  }

  if (!g_cuda_dead) {
    cudaEventDestroy(g_ev0);
    cudaEventDestroy(g_ev1);
    cudnnDestroy(h);
  }
  if (tot.skipped)
    std::printf("# %d geometries not run (%s)\n", tot.skipped,
                g_cuda_dead ? "CUDA error" : "total budget -T exhausted");
  std::string extra;  // -s / -f totals; empty by default so the line stays as it was
  char buf[256];
  if (opt.sweep) extra += " sweep_wins=" + std::to_string(tot.sweep_wins);
  if (opt.fused) {
    std::snprintf(buf, sizeof buf,
                  " fused_geoms=%d fused_with_plan=%d unfused_weighted_ms=%.3f "
                  "fused_weighted_ms=%.3f fused_ratio=%.3f",
                  tot.fused_geoms, tot.fused_with_plan, tot.unfused, tot.fused,
                  tot.fused > 0 ? tot.unfused / tot.fused : 0.0);
    extra += buf;
  }
  std::printf(
      "SUMMARY geoms=%d with_backend=%d weighted(calls) legacy_ms=%.3f best_backend_ms=%.3f "
      "ratio=%.3f best_of_both_ms=%.3f ratio_both=%.3f%s wall_s=%.0f\n",
      tot.geoms, tot.with_backend, tot.legacy, tot.backend,
      tot.backend > 0 ? tot.legacy / tot.backend : 0.0, tot.best_of_both,
      tot.best_of_both > 0 ? tot.legacy / tot.best_of_both : 0.0, extra.c_str(), seconds_since(t0));
  return g_cuda_dead ? 1 : 0;
}
