#include "backend/cuda/conv_cudnn.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/device.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/stream.h"
#include "core/error.h"
#include "ops/elementwise.h"

namespace ltx::cuda {

namespace {

#define LTX_CUDNN_CHECK(call)                                                                 \
  do {                                                                                        \
    const cudnnStatus_t ltx_cudnn_status = (call);                                            \
    if (ltx_cudnn_status != CUDNN_STATUS_SUCCESS)                                             \
      ::ltx::fail("cuDNN call ", #call, " failed: ", cudnnGetErrorString(ltx_cudnn_status), \
                  " (", __FILE__, ":", __LINE__, ")");                                        \
  } while (0)

// One handle per device, created on first use and intentionally leaked (like the cuBLASLt ones).
cudnnHandle_t handle_for(int device) {
  static std::mutex mu;
  static auto* handles = new std::vector<cudnnHandle_t>();
  std::lock_guard<std::mutex> lock(mu);
  if (handles->empty()) handles->assign(static_cast<size_t>(device_count()), nullptr);
  cudnnHandle_t& h = (*handles)[static_cast<size_t>(device)];
  if (h == nullptr) {
    DeviceGuard guard(device);
    LTX_CUDNN_CHECK(cudnnCreate(&h));
  }
  return h;
}

// Whether the cuDNN library loads and works here (it is dlopen'ed in pieces by libcudnn.so.9, so a
// broken install shows up at the first handle). Asked once per process.
bool cudnn_works() {
  static const bool ok = [] {
    try {
      (void)handle_for(0);
      return true;
    } catch (const Error&) {
      return false;
    }
  }();
  return ok;
}

constexpr int kDims = 5;  // N, C and three spatial dims

struct Geometry {
  std::array<int, kDims> x{}, w{}, y{};
  std::array<int, 3> pad{}, stride{}, dilation{};
  int groups = 1;
};

// cuDNN's int descriptors of the shared convolution geometry (spatial dims already padded to 3).
Geometry geometry(const cpu::ConvGeometry& c) {
  const auto i32 = [](int64_t v) { return static_cast<int>(v); };
  Geometry g;
  g.x = {i32(c.N), i32(c.C), i32(c.in[0]), i32(c.in[1]), i32(c.in[2])};
  g.w = {i32(c.O), i32(c.Cg), i32(c.k[0]), i32(c.k[1]), i32(c.k[2])};
  g.y = {i32(c.N), i32(c.O), i32(c.out[0]), i32(c.out[1]), i32(c.out[2])};
  for (int i = 0; i < 3; ++i) {
    g.pad[i] = i32(c.p[i]);
    g.stride[i] = i32(c.s[i]);
    g.dilation[i] = i32(c.d[i]);
  }
  g.groups = i32(c.G);
  return g;
}

// Strides of NCDHW-ordered dims stored as NDHWC.
std::array<int, kDims> channels_last_strides(const std::array<int, kDims>& dims) {
  std::array<int, kDims> s{};
  s[1] = 1;
  int acc = dims[1];
  for (int i = kDims - 1; i >= 2; --i) {
    s[i] = acc;
    acc *= dims[i];
  }
  s[0] = acc;
  return s;
}

// t as a dense channels-last operand ([N, *spatial, C] memory) starting on a 16-byte boundary:
// t itself when it already is (a channels-last activation), else a copy. A dense view into a
// larger buffer (a frame slice, say) can start anywhere, and cuDNN's algorithms may require
// aligned operands (cudnnFind measures them on its own aligned scratch buffers).
Tensor channels_last_operand(const Tensor& t) {
  if (t.is_channels_last() && reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0) return t;
  Tensor last = Tensor::empty_in_order(t.shape(), Tensor::channels_last_order(t.dim()), t.dtype(),
                                       t.device());
  last.copy_from(t);
  return last;
}

// RAII wrappers of the descriptors of one call.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  explicit Descriptors(const Geometry& g) {
    LTX_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
    LTX_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
    LTX_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    LTX_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    // Channels-last (NDHWC) data and filters: cuDNN's tensor-core 3-D kernels want them (with
    // NCDHW it falls back to kernels measured at ~22 TFLOP/s on the VAE decoder).
    const auto xs = channels_last_strides(g.x), ys = channels_last_strides(g.y);
    LTX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(x, CUDNN_DATA_BFLOAT16, kDims, g.x.data(), xs.data()));
    LTX_CUDNN_CHECK(cudnnSetTensorNdDescriptor(y, CUDNN_DATA_BFLOAT16, kDims, g.y.data(), ys.data()));
    LTX_CUDNN_CHECK(
        cudnnSetFilterNdDescriptor(w, CUDNN_DATA_BFLOAT16, CUDNN_TENSOR_NHWC, kDims, g.w.data()));
    LTX_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(conv, 3, g.pad.data(), g.stride.data(),
                                                    g.dilation.data(), CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT));
    LTX_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, g.groups));
    LTX_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, CUDNN_TENSOR_OP_MATH));
  }
  ~Descriptors() {
    cudnnDestroyConvolutionDescriptor(conv);
    cudnnDestroyFilterDescriptor(w);
    cudnnDestroyTensorDescriptor(y);
    cudnnDestroyTensorDescriptor(x);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

struct AlgoChoice {
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t workspace = 0;
  float measured_ms = -1.f;  // cudnnFind's time of this algorithm (-1: heuristic pick, not timed)
};
using AlgoKey = std::tuple<int, std::array<int, kDims>, std::array<int, kDims>, std::array<int, 3>,
                           std::array<int, 3>, std::array<int, 3>, int>;

// The fastest algorithm cuDNN measures for this geometry, among those whose workspace stays under
// a quarter of the free memory (at most 2 GiB), measured once per geometry.
AlgoChoice choose_algorithm(int device, const Geometry& g, const Descriptors& d) {
  static std::mutex mu;
  static auto* cache = new std::map<AlgoKey, AlgoChoice>();
  const AlgoKey key{device, g.x, g.w, g.pad, g.stride, g.dilation, g.groups};
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto it = cache->find(key);
    if (it != cache->end()) return it->second;
  }
  cudnnHandle_t h = handle_for(device);
  constexpr int kMaxAlgos = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  std::array<cudnnConvolutionFwdAlgoPerf_t, kMaxAlgos> perf{};
  int found = 0;
  // The heuristic list first: it never runs anything, and tells us the candidates' workspaces.
  LTX_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, kMaxAlgos, &found,
                                                         perf.data()));
  const MemoryInfo mem = memory_info(device);
  const size_t limit = std::min<size_t>(mem.free_bytes / 4, size_t{2} << 30);
  AlgoChoice best;
  bool have = false;
  for (int i = 0; i < found && !have; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > limit) continue;
    best = AlgoChoice{perf[i].algo, perf[i].memory};
    have = true;
  }
  // Then a measured choice (runs each candidate once on scratch buffers cuDNN allocates itself).
  int measured = 0;
  std::array<cudnnConvolutionFwdAlgoPerf_t, kMaxAlgos> timed{};
  if (cudnnFindConvolutionForwardAlgorithm(h, d.x, d.w, d.conv, d.y, kMaxAlgos, &measured,
                                           timed.data()) == CUDNN_STATUS_SUCCESS) {
    for (int i = 0; i < measured; ++i) {
      if (timed[i].status != CUDNN_STATUS_SUCCESS || timed[i].memory > limit) continue;
      best = AlgoChoice{timed[i].algo, timed[i].memory, timed[i].time};
      have = true;
      break;  // sorted fastest first
    }
  }
  LTX_CHECK(have, "conv (cuDNN): no forward algorithm for input ", g.x[0], "x", g.x[1], "x", g.x[2],
            "x", g.x[3], "x", g.x[4], " and filter ", g.w[0], "x", g.w[1], "x", g.w[2], "x", g.w[3],
            "x", g.w[4], " fits the memory left (", mem.free_bytes >> 20, " MiB free)");
  std::lock_guard<std::mutex> lock(mu);
  cache->emplace(key, best);
  return best;
}

// LTX_CUDNN_STATS=1: every geometry's calls, algorithm and cudnnFind time, printed to stderr at
// exit as `cudnn-conv N C D H W O kD kH kW padD padH padW calls # ...` lines, heaviest first (the
// input format of tools/bench/cudnn_conv_engines_probe.cpp). Off by default: one map lookup per
// convolution when on.
struct GeometryStats {
  AlgoChoice choice;
  int64_t calls = 0;
};

bool stats_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("LTX_CUDNN_STATS");
    return v != nullptr && *v != '\0' && std::string(v) != "0";
  }();
  return on;
}

std::map<AlgoKey, GeometryStats>& stats_table() {
  static auto* table = new std::map<AlgoKey, GeometryStats>();
  return *table;
}

void print_stats() {
  std::vector<std::pair<AlgoKey, GeometryStats>> rows(stats_table().begin(), stats_table().end());
  const auto total = [](const GeometryStats& s) { return double(s.calls) * s.choice.measured_ms; };
  std::sort(rows.begin(), rows.end(),
            [&](const auto& a, const auto& b) { return total(a.second) > total(b.second); });
  double sum = 0;
  for (const auto& [key, st] : rows) sum += total(st);
  std::fprintf(stderr, "# cuDNN convolutions (LTX_CUDNN_STATS): %zu geometries, ~%.1f ms at cudnnFind's times\n",
               rows.size(), sum);
  for (const auto& [key, st] : rows) {
    const auto& [device, x, w, pad, stride, dilation, groups] = key;
    std::fprintf(stderr,
                 "cudnn-conv %d %d %d %d %d %d %d %d %d %d %d %d %lld # algo %d workspace %zu B "
                 "find %.3f ms total %.1f ms stride %d,%d,%d dilation %d,%d,%d groups %d device %d\n",
                 x[0], x[1], x[2], x[3], x[4], w[0], w[2], w[3], w[4], pad[0], pad[1], pad[2],
                 static_cast<long long>(st.calls), int(st.choice.algo), st.choice.workspace,
                 double(st.choice.measured_ms), total(st), stride[0], stride[1], stride[2],
                 dilation[0], dilation[1], dilation[2], groups, device);
  }
}

void count_call(int device, const Geometry& g, const AlgoChoice& choice) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  static const bool registered = [] { return std::atexit(print_stats) == 0; }();
  (void)registered;
  GeometryStats& st =
      stats_table()[AlgoKey{device, g.x, g.w, g.pad, g.stride, g.dilation, g.groups}];
  st.choice = choice;
  ++st.calls;
}

template <size_t N>
std::string describe(const std::array<int, N>& a) {
  std::string s;
  for (size_t i = 0; i < N; ++i) s += (i ? "x" : "") + std::to_string(a[i]);
  return s;
}

bool fits_int32(const Tensor& t) {
  return t.numel() < std::numeric_limits<int32_t>::max();
}

}  // namespace

bool cudnn_conv_applies(const Tensor& x, const Tensor& w, const Tensor& bias,
                        const cpu::ConvSpec& spec) {
  if (x.dtype() != DType::BF16 || w.dtype() != DType::BF16) return false;
  if (bias.defined() && bias.dtype() != DType::BF16) return false;
  if (spec.rank < 1 || spec.rank > 3 || !fits_int32(x) || !fits_int32(w)) return false;
  const cpu::ConvGeometry c = cpu::conv_geometry(x, w, spec, false);
  // Channels-last bf16 needs 8-channel (16-byte) multiples per group on both sides: with fewer
  // (the tiny test models' 4-channel latents, say) cuDNN lists algorithms that then reject the
  // call with CUDNN_STATUS_BAD_PARAM; those convolutions are small and keep the im2col path.
  if (c.Cg % 8 != 0 || c.Og % 8 != 0) return false;
  for (const int64_t o : c.out)
    if (o <= 0) return false;
  const int64_t out = c.N * c.O * c.Pout;
  if (out <= 0 || out >= std::numeric_limits<int32_t>::max()) return false;
  return cudnn_works();
}

namespace {

// y = conv(x, w) + beta * y through cuDNN (beta 0: overwrite; 1: accumulate onto y, computed in
// f32 and rounded once). x, w and y are dense channels-last and 16-byte aligned; g describes them.
void run_forward(int device, const Geometry& g, const Tensor& x, const Tensor& w, const Tensor& y,
                 float beta) {
  const Stream stream = current_stream(device);
  cudnnHandle_t h = handle_for(device);
  LTX_CUDNN_CHECK(cudnnSetStream(h, stream.handle()));
  const Descriptors d(g);
  const AlgoChoice choice = choose_algorithm(device, g, d);
  if (stats_enabled()) count_call(device, g, choice);
  std::shared_ptr<void> workspace;
  if (choice.workspace > 0) workspace = allocate(choice.workspace, stream);
  const float alpha = 1.f;
  const cudnnStatus_t status =
      cudnnConvolutionForward(h, &alpha, d.x, x.raw_data(), d.w, w.raw_data(), d.conv, choice.algo,
                              workspace.get(), choice.workspace, &beta, d.y, y.raw_data());
  LTX_CHECK(status == CUDNN_STATUS_SUCCESS, "cuDNN convolution (algorithm ", int(choice.algo),
            ", workspace ", choice.workspace, " B, beta ", beta, ") failed: ",
            cudnnGetErrorString(status), "; input ", describe(g.x), ", filter ", describe(g.w),
            ", output ", describe(g.y), ", pad ", describe(g.pad), ", stride ", describe(g.stride),
            ", dilation ", describe(g.dilation), ", groups ", g.groups);
}

// The channels-last result `out` with the bias added, in the layout the caller gets: channels-last
// when the input was (added in place), else a contiguous NC(D)HW tensor (the add writes it, one
// pass instead of a copy and an add). PyTorch adds the bias after cuDNN's convolution too (a
// separate add in the output dtype), so the result rounds twice: conv result, then + bias.
Tensor finish(const Tensor& out, const Tensor& bias, bool channels_last) {
  Shape bias_shape;
  for (int i = 0; i < out.dim(); ++i) bias_shape.push_back(i == 1 ? out.size(1) : 1);
  if (channels_last) {
    if (bias.defined()) ops::add_(out, bias.view(bias_shape));
    return out;
  }
  Tensor res = Tensor::empty(out.shape(), out.dtype(), out.device());
  if (bias.defined()) {
    binary_into(ops::BinaryOp::Add, res, out, bias.view(bias_shape));
  } else {
    res.copy_from(out);
  }
  return res;
}

// Whether the caller's x is a channels-last activation, possibly a non-dense view of one (the
// frames narrowed out of a batch > 1): its result stays channels-last.
bool channels_last_input(const Tensor& x) {
  return x.is_channels_last() ||
         (x.size(1) > 1 && x.stride(1) == 1 && x.dim_order() == Tensor::channels_last_order(x.dim()));
}

Tensor empty_channels_last(const Shape& shape, Device device) {
  return Tensor::empty_in_order(shape, Tensor::channels_last_order(shape.size()), DType::BF16,
                                device);
}

// sum_{t0 <= t < t1} w[:, :, t] as a channels-last bf16 [O, C / groups, 1, kh, kw] (summed in
// f32, rounded once; one slice is just copied): the weight of a fold's boundary taps. Made per
// call (one small copy per side for k_t = 3) rather than cached per weight: a cache held ~2/3 of
// the 3x3x3 weights again for the whole decode.
Tensor summed_slices(const Tensor& w, int64_t t0, int64_t t1) {
  if (t1 - t0 == 1) return channels_last_operand(w.narrow(2, t0, 1));
  Tensor acc = w.narrow(2, t0, 1).to(DType::F32);
  for (int64_t t = t0 + 1; t < t1; ++t) acc = ops::add(acc, w.narrow(2, t, 1));
  return channels_last_operand(acc.to(DType::BF16));
}

}  // namespace

Tensor cudnn_conv_nd(const Tensor& x_in, const Tensor& w_in, const Tensor& bias,
                     const cpu::ConvSpec& spec) {
  const int device = x_in.device().index;
  DeviceGuard guard(device);
  const cpu::ConvGeometry c = cpu::conv_geometry(x_in, w_in, spec, false);
  const Shape out_shape = cpu::conv_output_shape(c, spec.rank);
  const bool keep_last = channels_last_input(x_in);
  const Tensor out = empty_channels_last(out_shape, x_in.device());
  if (out_shape.numel() == 0) return finish(out, Tensor(), keep_last);
  run_forward(device, geometry(c), channels_last_operand(x_in), channels_last_operand(w_in), out,
              0.f);
  return finish(out, bias, keep_last);
}

bool cudnn_replicate_time_applies(const Tensor& x, const Tensor& w, const Tensor& bias,
                                  const cpu::ConvSpec& spec, int64_t pad_front, int64_t pad_back) {
  if (spec.rank != 3 || x.dim() != 5 || w.dim() != 5 || spec.groups != 1) return false;
  const int64_t k = w.size(2), p = k / 2;
  if (pad_front != p || pad_back != p || p < 1 || spec.stride[0] != 1 || spec.dilation[0] != 1 ||
      spec.padding[0] != 0 || x.size(2) < 1)
    return false;
  cpu::ConvSpec padded = spec;
  padded.padding[0] = p;  // the conv the fold runs
  return cudnn_conv_applies(x, w, bias, padded);
}

Tensor cudnn_conv3d_replicate_time(const Tensor& x_in, const Tensor& w_in, const Tensor& bias,
                                   const cpu::ConvSpec& spec, int64_t pad_front,
                                   int64_t pad_back) {
  LTX_CHECK(cudnn_replicate_time_applies(x_in, w_in, bias, spec, pad_front, pad_back),
            "conv3d_replicate_time (cuDNN): the fold does not apply to input ", x_in.describe(),
            ", weight ", w_in.describe(), ", temporal pads ", pad_front, "/", pad_back,
            "; call ops::conv3d_replicate_time, which falls back to pad + conv3d");
  const int device = x_in.device().index;
  DeviceGuard guard(device);
  const int64_t k = w_in.size(2), p = k / 2, T = x_in.size(2), N = x_in.size(0);
  // 1. The conv with zero temporal padding p: every tap that reads a real frame.
  cpu::ConvSpec main = spec;
  main.padding[0] = p;
  const cpu::ConvGeometry c = cpu::conv_geometry(x_in, w_in, main, false);
  const Shape out_shape = cpu::conv_output_shape(c, 3);
  const bool keep_last = channels_last_input(x_in);
  const Tensor out = empty_channels_last(out_shape, x_in.device());
  if (out_shape.numel() == 0) return finish(out, Tensor(), keep_last);
  const Tensor x = channels_last_operand(x_in);
  run_forward(device, geometry(c), x, channels_last_operand(w_in), out, 0.f);
  // 2. The taps that read the replicated frames: output frame j misses taps t < p - j (they read
  // frame 0) and taps t >= T + p - j (they read frame T - 1); each set is one 1-frame conv with
  // the summed weight slices, accumulated onto the frame (beta = 1). Per sample, so that every
  // operand is a dense channels-last block.
  // front[m] / back[m]: the summed first / last m slices, made when a frame first needs them.
  std::vector<Tensor> front(static_cast<size_t>(p + 1)), back(static_cast<size_t>(p + 1));
  cpu::ConvSpec frame = spec;  // spatial padding / stride / dilation as given, 1 frame in time
  frame.padding[0] = 0;
  const int64_t T_out = out_shape[2];
  for (int64_t j = 0; j < T_out; ++j) {
    const int64_t m_front = std::max<int64_t>(0, p - j);
    const int64_t m_back = std::max<int64_t>(0, k - std::max<int64_t>(0, T + p - j));
    for (int side = 0; side < 2; ++side) {
      const int64_t m = side == 0 ? m_front : m_back;
      if (m == 0) continue;
      Tensor& ws = side == 0 ? front[static_cast<size_t>(m)] : back[static_cast<size_t>(m)];
      if (!ws.defined()) ws = side == 0 ? summed_slices(w_in, 0, m) : summed_slices(w_in, k - m, k);
      const int64_t src = side == 0 ? 0 : T - 1;
      for (int64_t n = 0; n < N; ++n) {
        const Tensor xs = x.narrow(0, n, 1).narrow(2, src, 1);
        const Tensor ys = out.narrow(0, n, 1).narrow(2, j, 1);
        run_forward(device, geometry(cpu::conv_geometry(xs, ws, frame, false)), xs, ws, ys, 1.f);
      }
    }
  }
  return finish(out, bias, keep_last);
}

}  // namespace ltx::cuda
