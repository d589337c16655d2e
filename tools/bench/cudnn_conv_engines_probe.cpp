// cudnn_conv_engines_probe.cpp -- does cuDNN's backend (graph) API offer faster engines than the
// legacy cudnnFindConvolutionForwardAlgorithm for the video VAE decoder's 3-D bf16 convolutions?
//
// Standalone experiment tool (CUDA runtime + cuDNN only; raw backend C API, no cudnn-frontend).
// nvcc is required (two tiny kernels fill the inputs and compare outputs on the device):
//   nvcc -std=c++17 -O2 -x cu -arch=sm_90a -Xcompiler -Wall,-Wextra tools/bench/cudnn_conv_engines_probe.cpp -lcudnn -o /tmp/probe
//   (add -I/-L for cuDNN if it is not next to the CUDA toolkit, e.g. -I/usr/include -L/usr/lib/x86_64-linux-gnu)
//
// Usage: /tmp/probe [-v] [-n] [-k TOP] [-t SEC] [-T SEC] < geoms.txt
//   stdin : one conv per line "N C D H W O kD kH kW padD padH padW calls"; '#' lines and empty
//           lines are skipped. stride 1, dilation 1, groups 1, cross-correlation; x, w, y are bf16
//           channels-last (NDHWC, weights O kD kH kW C), fp32 accumulation. `calls` only weights
//           the summary.
//   -v    : verbose, one line per candidate (also PROBE_VERBOSE=1)
//   -n    : skip engines that need runtime compilation (NVRTC at plan finalize, can be slow)
//   -k    : backend configs listed per geometry (default 5)
//   -t    : wall-clock budget per geometry for the backend candidates (default 90 s)
//   -T    : wall-clock budget for the whole run (default 540 s); later geometries are skipped so
//           that the SUMMARY line is still printed
//
// Per geometry: legacy cudnnFind picks its fastest algorithm (workspace <= 2 GiB), which is
// re-timed here (2 warm-ups + median of 5, cudaEvents). Then every engine config offered by the
// backend -- heuristics modes A, B, FALLBACK (all results) and every global engine index with
// default knobs -- is planned, timed the same way and checked against the legacy output
// (relative L2 > 1e-2 => BAD, not eligible). Candidate names are "e<global index>[knob=value,..]"
// (no knob list = the engine's default knobs); src letters: A/B/F heuristics mode, G global
// enumeration; {notes}: tc tensor cores, dc down-converts inputs, rp reduced-precision reduction,
// fft, wino, nd non-deterministic, rtc runtime-compiled.
//
// Output (stdout; concise, the SUMMARY line is last):
//   geom N C D H W O kDxkHxkW pPDxPHxPW calls=.. legacy_algo=A legacy_ms=X best_backend=NAME
//        backend_ms=Y speedup=X/Y candidates=K ok=.. bad=.. fail=.. slow=.. skipped=..
//     #1 Y ms NAME src=.. ws=..M rel=.. {notes}         (top configs, BAD ones marked)
//   SUMMARY geoms=G weighted(calls) legacy_ms=.. best_backend_ms=.. ratio=.. best_of_both_ms=.. ratio=..
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

enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };

bool make_tensor(BD& t, int64_t uid, const int64_t dims[5], const int64_t strides[5]) {
  t = BD(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  if (!t.d) {
    g_err = "create tensor descriptor";
    return false;
  }
  const cudnnDataType_t dt = CUDNN_DATA_BFLOAT16;
  const int64_t align = 16;
  CUDNN_TRY(cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  CUDNN_TRY(
      cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
  CUDNN_TRY(cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 5, dims));
  CUDNN_TRY(cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 5, strides));
  CUDNN_TRY(
      cudnnBackendSetAttribute(t.d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  CUDNN_TRY(cudnnBackendFinalize(t.d));
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

  G->conv = BD(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t spatial = 3, pad[3] = {g.pd, g.ph, g.pw}, one[3] = {1, 1, 1};
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  CUDNN_TRY(cudnnBackendSetAttribute(G->conv.d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS,
                                     CUDNN_TYPE_INT64, 1, &spatial));
  CUDNN_TRY(cudnnBackendSetAttribute(G->conv.d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
                                     CUDNN_TYPE_DATA_TYPE, 1, &comp));
  CUDNN_TRY(cudnnBackendSetAttribute(G->conv.d, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                                     CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  CUDNN_TRY(cudnnBackendSetAttribute(G->conv.d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64,
                                     3, one));
  CUDNN_TRY(cudnnBackendSetAttribute(G->conv.d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES,
                                     CUDNN_TYPE_INT64, 3, one));
  CUDNN_TRY(cudnnBackendSetAttribute(G->conv.d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS,
                                     CUDNN_TYPE_INT64, 3, pad));
  CUDNN_TRY(cudnnBackendSetAttribute(G->conv.d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS,
                                     CUDNN_TYPE_INT64, 3, pad));
  CUDNN_TRY(cudnnBackendFinalize(G->conv.d));

  // alpha/beta are host floats because the compute type is float (double only for double).
  G->op = BD(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.f, beta = 0.f;
  CUDNN_TRY(cudnnBackendSetAttribute(G->op.d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &G->x.d));
  CUDNN_TRY(cudnnBackendSetAttribute(G->op.d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &G->w.d));
  CUDNN_TRY(cudnnBackendSetAttribute(G->op.d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &G->y.d));
  CUDNN_TRY(cudnnBackendSetAttribute(G->op.d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &G->conv.d));
  CUDNN_TRY(cudnnBackendSetAttribute(G->op.d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                     CUDNN_TYPE_FLOAT, 1, &alpha));
  CUDNN_TRY(cudnnBackendSetAttribute(G->op.d, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                                     CUDNN_TYPE_FLOAT, 1, &beta));
  CUDNN_TRY(cudnnBackendFinalize(G->op.d));

  // The HANDLE attribute is deprecated in recent cuDNN 9 but still accepted, and the runtime on
  // the target machine (9.14) may predate it being optional.
  G->graph = BD(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  CUDNN_TRY(cudnnBackendSetAttribute(G->graph.d, CUDNN_ATTR_OPERATIONGRAPH_HANDLE,
                                     CUDNN_TYPE_HANDLE, 1, &h));
  CUDNN_TRY(cudnnBackendSetAttribute(G->graph.d, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &G->op.d));
  CUDNN_TRY(cudnnBackendFinalize(G->graph.d));
  return true;
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

// Engine global index, knob choices and notes of a finalized engine config.
bool describe_cfg(cudnnBackendDescriptor_t cfg, std::string* name, std::string* notes, bool* rtc) {
  BD eng(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t cnt = 0, idx = -1;
  CUDNN_TRY(cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt, &eng.d));
  CUDNN_TRY(cudnnBackendGetAttribute(eng.d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                                     &cnt, &idx));

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
  std::vector<std::pair<int, int64_t>> knobs;
  for (int64_t i = 0; i < std::min<int64_t>(nk, int64_t(raw.size())); ++i) {
    cudnnBackendKnobType_t type = CUDNN_KNOB_TYPE_COUNTS;
    int64_t val = 0;
    CUDNN_TRY(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                       CUDNN_TYPE_KNOB_TYPE, 1, &cnt, &type));
    CUDNN_TRY(cudnnBackendGetAttribute(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                       CUDNN_TYPE_INT64, 1, &cnt, &val));
    knobs.emplace_back(int(type), val);
  }
  std::sort(knobs.begin(), knobs.end());  // canonical order for dedup
  *name = "e" + std::to_string(idx);
  if (!knobs.empty()) {
    *name += "[";
    for (size_t i = 0; i < knobs.size(); ++i) {
      const char* kn = ltx::cuda::cudnn_knob_name(knobs[i].first);
      *name += (i ? "," : "") + (kn ? std::string(kn) : "k" + std::to_string(knobs[i].first)) +
               "=" + std::to_string(knobs[i].second);
    }
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

// Adds a finalized config unless an identical one (same engine + knobs) is already there.
void add_cand(CandSet& cs, BD cfg, BD engine, char src) {
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
    return;
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
  for (int64_t i = 0; i < *total; ++i) {
    BD eng(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    if (cudnnBackendSetAttribute(eng.d, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &graph) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendSetAttribute(eng.d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &i) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnBackendFinalize(eng.d) != CUDNN_STATUS_SUCCESS)
      continue;
    BD cfg(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (cudnnBackendSetAttribute(cfg.d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 1, &eng.d) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendFinalize(cfg.d) != CUDNN_STATUS_SUCCESS)
      continue;
    ++*supported;
    add_cand(cs, std::move(cfg), std::move(eng), 'G');
  }
  *added = int(cs.v.size() - before);
}

// ---------------------------------------------------------------------------------------------
// Evaluation of one candidate
// ---------------------------------------------------------------------------------------------

struct Res {
  std::string name, src, notes;
  float ms = -1;
  double rel = NAN, maxabs = NAN;
  int64_t ws = 0;
  bool bad = false;
};

enum class Outcome { kOk, kSkipWs, kSkipRtc, kFail, kSlow };

Outcome eval_cand(cudnnHandle_t h, Cand& c, Bufs& b, DevBuf& ws, float limit_ms, bool skip_rtc,
                  Res* r, std::string* why) {
  r->name = c.name;
  r->src = c.src;
  r->notes = c.notes;
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
  if ((s = cudnnBackendSetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                    &h)) != CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendSetAttribute(plan.d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c.cfg.d)) !=
          CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendFinalize(plan.d)) != CUDNN_STATUS_SUCCESS) {
    *why = "plan: " + cudnn_msg(s);
    return Outcome::kFail;
  }
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
  int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* ptrs[3] = {b.x, b.w, b.y};
  void* wsp = ws.p;
  if ((s = cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3,
                                    uids)) != CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                    CUDNN_TYPE_VOID_PTR, 3, ptrs)) != CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                    &wsp)) != CUDNN_STATUS_SUCCESS ||
      (s = cudnnBackendFinalize(vp.d)) != CUDNN_STATUS_SUCCESS) {
    *why = "variant pack: " + cudnn_msg(s);
    return Outcome::kFail;
  }

  // Poison y (bf16 NaN) so an engine that silently writes nothing fails the check.
  CUDA_FATAL(cudaMemset(b.y, 0xFF, b.ny * 2));
  const float ms = bench([&] { return cudnnBackendExecute(h, plan.d, vp.d); }, limit_ms, why);
  if (ms == -2) return Outcome::kSlow;
  if (ms < 0) return Outcome::kFail;
  r->ms = ms;
  if (!compare(b.y, b.yref, b.ny, &r->rel, &r->maxabs)) {
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
};

void run_geom(cudnnHandle_t h, const Geom& g, DevBuf& ws, bool skip_rtc, int top_k,
              Clock::time_point deadline, Totals& tot) {
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
  std::string heur_failed;  // tags of heuristics modes that failed
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

    const float limit_ms = kSlowFactor * L.ms;
    for (Cand& c : cs.v) {
      if (g_cuda_dead) break;
      if (Clock::now() > deadline) {
        ++n_budget;
        continue;
      }
      Res r;
      std::string why;
      const Outcome o = eval_cand(h, c, b, ws, limit_ms, skip_rtc, &r, &why);
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
  for (int i = 0; i < int(ok.size()) && i < top_k; ++i) {
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
}

void usage() {
  std::printf(
      "usage: probe [-v] [-n] [-k TOP] [-t SEC_PER_GEOM] [-T SEC_TOTAL] < geoms\n"
      "  stdin lines: N C D H W O kD kH kW padD padH padW calls\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool skip_rtc = false;
  int top_k = 5;
  double geom_budget_s = 90, total_budget_s = 540;
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
      skip_rtc = true;
    } else if (a == "-k") {
      double k = 0;
      next(&k);
      top_k = int(k);
    } else if (a == "-t") {
      next(&geom_budget_s);
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
      "budget %.0f s/geom %.0f s total%s\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, cudnnGetVersion(), CUDNN_VERSION,
      geoms.size(), geom_budget_s, total_budget_s,
      skip_rtc ? ", skipping runtime-compiled engines" : "");

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
                           std::chrono::duration<double>(std::min(geom_budget_s, left)));
    run_geom(h, g, ws, skip_rtc, top_k, deadline, tot);
  }

  if (!g_cuda_dead) {
    cudaEventDestroy(g_ev0);
    cudaEventDestroy(g_ev1);
    cudnnDestroy(h);
  }
  if (tot.skipped)
    std::printf("# %d geometries not run (%s)\n", tot.skipped,
                g_cuda_dead ? "CUDA error" : "total budget -T exhausted");
  std::printf(
      "SUMMARY geoms=%d with_backend=%d weighted(calls) legacy_ms=%.3f best_backend_ms=%.3f "
      "ratio=%.3f best_of_both_ms=%.3f ratio_both=%.3f wall_s=%.0f\n",
      tot.geoms, tot.with_backend, tot.legacy, tot.backend,
      tot.backend > 0 ? tot.legacy / tot.backend : 0.0, tot.best_of_both,
      tot.best_of_both > 0 ? tot.legacy / tot.best_of_both : 0.0, seconds_since(t0));
  return g_cuda_dead ? 1 : 0;
}
