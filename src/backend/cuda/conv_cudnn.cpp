// cuDNN forward convolutions (conv_cudnn.h). Every call ends in run_forward, which runs the
// geometry's cached choice: a backend-API execution plan when one measured faster than the legacy
// algorithm, else cudnnConvolutionForward with cudnnFind's pick (also the fallback whenever the
// backend path fails). The choice costs one timing pass per geometry, on its first call in the
// first process: later processes find it in the tuning cache (conv_tuning_cache.h).
#include "backend/cuda/conv_cudnn.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/conv_tuning_cache.h"
#include "backend/cuda/cudnn_knob_names.h"
#include "backend/cuda/device.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/stream.h"
#include "core/env_settings.h"
#include "core/error.h"

namespace ltx::cuda {

namespace {

#define LTX_CUDNN_CHECK(call)                                                                 \
  do {                                                                                        \
    const cudnnStatus_t ltx_cudnn_status = (call);                                            \
    if (ltx_cudnn_status != CUDNN_STATUS_SUCCESS)                                             \
      ::ltx::fail("cuDNN call ", #call, " failed: ", cudnnGetErrorString(ltx_cudnn_status), \
                  " (", __FILE__, ":", __LINE__, ")");                                        \
  } while (0)

// One handle per stream, bound to it when created and intentionally leaked (like the cuBLASLt
// ones). cuDNN runs a call on its handle's stream, so a handle shared by two host threads that
// issue on different streams (the audio decode beside the video decode) would race on
// cudnnSetStream; a handle per stream is only ever used by the thread issuing on that stream.
cudnnHandle_t handle_for(int device) {
  const Stream stream = current_stream(device);
  static std::mutex mu;
  static auto* handles = new std::map<std::pair<int, cudaStream_t>, cudnnHandle_t>();
  std::lock_guard<std::mutex> lock(mu);
  cudnnHandle_t& h = (*handles)[{device, stream.handle()}];
  if (h == nullptr) {
    DeviceGuard guard(device);
    LTX_CUDNN_CHECK(cudnnCreate(&h));
    LTX_CUDNN_CHECK(cudnnSetStream(h, stream.handle()));
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
Geometry geometry(const ops::ConvGeometry& c) {
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

// The geometry as the tuning cache's keys spell it (conv_tuning_cache.h).
std::string geometry_key(const Geometry& g) {
  std::ostringstream s;
  const auto list = [&](const char* name, const auto& a) {
    s << name;
    for (size_t i = 0; i < a.size(); ++i) s << (i == 0 ? " " : ",") << a[i];
    s << ' ';
  };
  list("x", g.x);
  list("w", g.w);
  list("pad", g.pad);
  list("stride", g.stride);
  list("dilation", g.dilation);
  s << "groups " << g.groups;
  return s.str();
}

// Timed searches run so far (cudnnFind calls and backend timing passes; tests).
std::atomic<int64_t> g_timed_searches{0};

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
    // NCDHW it falls back to kernels at ~22 TFLOP/s on the VAE decoder, bench/RESULTS.md).
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

// The largest workspace a convolution may take, either API: a quarter of the free memory, at most
// 2 GiB.
size_t workspace_limit(int device) {
  return std::min<size_t>(memory_info(device).free_bytes / 4, size_t{2} << 30);
}

// The fastest algorithm cuDNN measures for this geometry, among those whose workspace stays under
// workspace_limit, measured once per geometry.
std::mutex g_algo_mu;
std::map<AlgoKey, AlgoChoice>& algo_cache() {
  static auto* cache = new std::map<AlgoKey, AlgoChoice>();
  return *cache;
}

// The legacy algorithm the tuning cache holds for g, when it still applies (its workspace within
// `limit`); nullopt otherwise.
std::optional<AlgoChoice> stored_algorithm(int device, const Geometry& g, const Descriptors& d,
                                           size_t limit) {
  const std::optional<std::string> v = conv_tuning::lookup(device, "legacy " + geometry_key(g));
  if (!v) return std::nullopt;
  std::istringstream in(*v);
  std::string word;
  int algo = -1;
  float ms = -1.f;
  while (in >> word) {
    if (word == "algo") in >> algo;
    if (word == "ms") in >> ms;
  }
  if (algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT) return std::nullopt;
  AlgoChoice c{static_cast<cudnnConvolutionFwdAlgo_t>(algo), 0, ms};
  if (cudnnGetConvolutionForwardWorkspaceSize(handle_for(device), d.x, d.w, d.conv, d.y, c.algo,
                                              &c.workspace) != CUDNN_STATUS_SUCCESS ||
      c.workspace > limit)
    return std::nullopt;
  return c;
}

AlgoChoice choose_algorithm(int device, const Geometry& g, const Descriptors& d) {
  const AlgoKey key{device, g.x, g.w, g.pad, g.stride, g.dilation, g.groups};
  {
    std::lock_guard<std::mutex> lock(g_algo_mu);
    const auto it = algo_cache().find(key);
    if (it != algo_cache().end()) return it->second;
  }
  if (const std::optional<AlgoChoice> stored = stored_algorithm(device, g, d, workspace_limit(device))) {
    std::lock_guard<std::mutex> lock(g_algo_mu);
    return algo_cache().emplace(key, *stored).first->second;
  }
  cudnnHandle_t h = handle_for(device);
  constexpr int kMaxAlgos = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  std::array<cudnnConvolutionFwdAlgoPerf_t, kMaxAlgos> perf{};
  int found = 0;
  // The heuristic list first: it never runs anything, and tells us the candidates' workspaces.
  LTX_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, kMaxAlgos, &found,
                                                         perf.data()));
  const size_t limit = workspace_limit(device);
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
  g_timed_searches.fetch_add(1, std::memory_order_relaxed);
  bool found_timed = false;
  if (cudnnFindConvolutionForwardAlgorithm(h, d.x, d.w, d.conv, d.y, kMaxAlgos, &measured,
                                           timed.data()) == CUDNN_STATUS_SUCCESS) {
    for (int i = 0; i < measured; ++i) {
      if (timed[i].status != CUDNN_STATUS_SUCCESS || timed[i].memory > limit) continue;
      best = AlgoChoice{timed[i].algo, timed[i].memory, timed[i].time};
      have = found_timed = true;
      break;  // sorted fastest first
    }
  }
  // Only a measured pick is kept for later processes (a heuristic one is the fallback of a failed
  // measurement, which the next process should retry).
  if (found_timed)
    conv_tuning::store(device, "legacy " + geometry_key(g),
                       str("algo ", int(best.algo), " ms ", best.measured_ms));
  LTX_CHECK(have, "conv (cuDNN): no forward algorithm for input ", g.x[0], "x", g.x[1], "x", g.x[2],
            "x", g.x[3], "x", g.x[4], " and filter ", g.w[0], "x", g.w[1], "x", g.w[2], "x", g.w[3],
            "x", g.w[4], " fits the memory left (", memory_info(device).free_bytes >> 20,
            " MiB free)");
  std::lock_guard<std::mutex> lock(g_algo_mu);
  return algo_cache().emplace(key, best).first->second;
}

// The device pointers of one convolution: y = conv(x, w) + beta * y.
struct Operands {
  const void* x = nullptr;
  const void* w = nullptr;
  void* y = nullptr;
};

// One legacy-API convolution with the chosen algorithm (the workspace holds algo.workspace bytes).
cudnnStatus_t legacy_forward(cudnnHandle_t h, const Descriptors& d, const AlgoChoice& algo,
                             const Operands& o, void* workspace, float beta) {
  const float alpha = 1.f;
  return cudnnConvolutionForward(h, &alpha, d.x, o.x, d.w, o.w, d.conv, algo.algo, workspace,
                                 algo.workspace, &beta, d.y, o.y);
}

// ---- The backend (graph) API -----------------------------------------------------------------
// One operation graph per geometry (a single convolution-forward op on bf16 channels-last
// tensors, alpha 1, the call's beta), its candidate engine configs from cuDNN's heuristics, and
// one execution plan per candidate. Building throws ltx::Error (LTX_CUDNN_CHECK, set_attr,
// finalize); choose_backend catches it and leaves the geometry on the legacy path.

// Which API run_forward may use (set_cudnn_backend_mode; kDefault: the environment).
std::atomic<int> g_mode{static_cast<int>(CudnnBackendMode::kDefault)};
std::atomic<int64_t> g_backend_executions{0};

CudnnBackendMode effective_mode() {
  const auto mode = static_cast<CudnnBackendMode>(g_mode.load(std::memory_order_relaxed));
  if (mode != CudnnBackendMode::kDefault) return mode;
  // LTX_CUDNN_BACKEND=0: the legacy API only (an A/B switch, and a way out should some cuDNN
  // version's engine misbehave). Read once.
  static const CudnnBackendMode from_env =
      env::settings().cudnn_backend ? CudnnBackendMode::kTimed : CudnnBackendMode::kOff;
  return from_env;
}

// Owns one backend descriptor (move-only).
class BackendDesc {
 public:
  BackendDesc() = default;
  explicit BackendDesc(cudnnBackendDescriptorType_t type) {
    LTX_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_));
  }
  ~BackendDesc() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  BackendDesc(BackendDesc&& o) noexcept : d_(std::exchange(o.d_, nullptr)) {}
  BackendDesc& operator=(BackendDesc&& o) noexcept {
    std::swap(d_, o.d_);
    return *this;
  }
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  // The handle as a one-element array, for descriptor-valued attributes.
  const cudnnBackendDescriptor_t* array() const { return &d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

void set_attr(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
              cudnnBackendAttributeType_t type, int64_t count, const void* values) {
  const cudnnStatus_t s = cudnnBackendSetAttribute(d, name, type, count, values);
  if (s != CUDNN_STATUS_SUCCESS)
    fail("cuDNN backend: attribute ", int(name), " rejected: ", cudnnGetErrorString(s));
}

void finalize(cudnnBackendDescriptor_t d, const char* what) {
  const cudnnStatus_t s = cudnnBackendFinalize(d);
  if (s != CUDNN_STATUS_SUCCESS)
    fail("cuDNN backend: the ", what, " does not finalize: ", cudnnGetErrorString(s));
}

// Up to `capacity` elements of an attribute; returns how many there are.
int64_t get_attr(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                 cudnnBackendAttributeType_t type, int64_t capacity, void* values) {
  int64_t count = 0;
  const cudnnStatus_t s = cudnnBackendGetAttribute(d, name, type, capacity, &count, values);
  if (s != CUDNN_STATUS_SUCCESS)
    fail("cuDNN backend: attribute ", int(name), " unreadable: ", cudnnGetErrorString(s));
  return count;
}

enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };  // the graph's tensors in a variant pack

// A bf16 tensor of the graph: NCDHW-ordered dims stored channels-last, as the legacy descriptors
// (filters [O, C / groups, kD, kH, kW] stored [O, kD, kH, kW, C / groups]).
BackendDesc make_tensor(int64_t uid, const std::array<int, kDims>& dims) {
  BackendDesc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const std::array<int, kDims> strides = channels_last_strides(dims);
  std::array<int64_t, kDims> d64{}, s64{};
  for (int i = 0; i < kDims; ++i) {
    d64[i] = dims[i];
    s64[i] = strides[i];
  }
  const cudnnDataType_t type = CUDNN_DATA_BFLOAT16;
  const int64_t alignment = 16;  // what channels_last_operand guarantees (run_forward checks)
  set_attr(t.get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  set_attr(t.get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  set_attr(t.get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, kDims, d64.data());
  set_attr(t.get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, kDims, s64.data());
  set_attr(t.get(), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  finalize(t.get(), "tensor descriptor");
  return t;
}

// The descriptors of one geometry's operation graph (kept as long as its plans: they were built
// from them).
struct OpGraph {
  BackendDesc x, w, y, conv, op, graph;
};

void build_graph(cudnnHandle_t h, const Geometry& g, float beta, OpGraph& og) {
  og.x = make_tensor(kUidX, g.x);
  og.w = make_tensor(kUidW, g.w);
  og.y = make_tensor(kUidY, g.y);

  og.conv = BackendDesc(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  const int64_t spatial = 3;
  std::array<int64_t, 3> pad{}, stride{}, dilation{};
  for (int i = 0; i < 3; ++i) {
    pad[i] = g.pad[i];
    stride[i] = g.stride[i];
    dilation[i] = g.dilation[i];
  }
  const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const cudnnBackendDescriptor_t c = og.conv.get();
  set_attr(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
  set_attr(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
  set_attr(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  set_attr(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 3, pad.data());
  set_attr(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 3, pad.data());
  set_attr(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 3, stride.data());
  set_attr(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 3, dilation.data());
  finalize(c, "convolution descriptor");

  // alpha and beta are floats: their type follows the compute type.
  og.op = BackendDesc(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  const float alpha = 1.f;
  const cudnnBackendDescriptor_t op = og.op.get();
  set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           og.x.array());
  set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           og.w.array());
  set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           og.y.array());
  set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           og.conv.array());
  set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
  set_attr(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  finalize(op, "convolution operation");

  // The handle attribute is deprecated in newer cuDNN 9 releases but still accepted, and the
  // runtime we deploy on (9.14) is older.
  og.graph = BackendDesc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set_attr(og.graph.get(), CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  set_attr(og.graph.get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           og.op.array());
  finalize(og.graph.get(), "operation graph");
}

// What run_forward needs to know of an engine config before planning it.
struct ConfigInfo {
  std::string name;  // "e<engine global index>[KNOB=value,...]": the dedup key and report name
  bool runtime_compiled = false;
  bool nondeterministic = false;
};

ConfigInfo describe_config(cudnnBackendDescriptor_t config) {
  ConfigInfo info;
  BackendDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  get_attr(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &e);
  int64_t index = -1;
  get_attr(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index);

  // Knob choices are copied into descriptors we create, one per possible knob type.
  std::vector<BackendDesc> choices;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int i = 0; i < int(CUDNN_KNOB_TYPE_COUNTS); ++i) {
    choices.emplace_back(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    raw.push_back(choices.back().get());
  }
  const int64_t n = std::min<int64_t>(
      get_attr(config, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
               int64_t(raw.size()), raw.data()),
      int64_t(raw.size()));
  std::vector<std::pair<int64_t, int64_t>> knobs;
  for (int64_t i = 0; i < n; ++i) {
    cudnnBackendKnobType_t type{};
    int64_t value = 0;
    get_attr(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type);
    get_attr(raw[size_t(i)], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &value);
    knobs.emplace_back(int64_t(type), value);
  }
  std::sort(knobs.begin(), knobs.end());  // one name per distinct config
  info.name = "e" + std::to_string(index);
  for (size_t i = 0; i < knobs.size(); ++i) {
    const char* kn = cudnn_knob_name(knobs[i].first);
    info.name += (i == 0 ? "[" : ",");
    info.name += kn != nullptr ? std::string(kn) : "k" + std::to_string(knobs[i].first);
    info.name += "=" + std::to_string(knobs[i].second);
  }
  if (!knobs.empty()) info.name += "]";

  // Runtime-compiled engines finalize through NVRTC (seconds per plan): a config whose behaviour
  // cannot be read is skipped (the caller catches). Determinism matches the legacy path's
  // repeatable results; skipped only when the note says so.
  std::array<cudnnBackendBehaviorNote_t, 16> behavior{};
  const int64_t nb = get_attr(e, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                              int64_t(behavior.size()), behavior.data());
  for (int64_t i = 0; i < std::min<int64_t>(nb, int64_t(behavior.size())); ++i)
    if (behavior[size_t(i)] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
      info.runtime_compiled = true;
  std::array<cudnnBackendNumericalNote_t, 16> numerical{};
  int64_t nn = 0;
  if (cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               int64_t(numerical.size()), &nn,
                               numerical.data()) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < std::min<int64_t>(nn, int64_t(numerical.size())); ++i)
      if (numerical[size_t(i)] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
        info.nondeterministic = true;
  }
  return info;
}

// An engine config with its finalized plan.
struct Candidate {
  BackendDesc config, plan;
  int64_t workspace = 0;
  std::string name;
  float ms = -1.f;  // measured by choose_backend (-1: failed)
};

// A geometry's operation graph and candidates; after the choice, only the chosen one.
struct BackendState {
  OpGraph graph;
  std::vector<BackendDesc> heuristics;  // kept with the configs they returned
  std::vector<Candidate> candidates;
};

// At most this many plans are timed per geometry: each costs a warm-up and two runs once.
constexpr size_t kMaxCandidates = 8;

// The engine configs cuDNN's heuristics (`mode`) list for st's graph, best first (at most 256 are
// read: only the first few qualifying ones are used); the heuristics descriptor is kept in st.
std::vector<BackendDesc> heuristic_configs(BackendState& st, cudnnBackendHeurMode_t mode) {
  BackendDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  set_attr(heur.get(), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           st.graph.graph.array());
  set_attr(heur.get(), CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  finalize(heur.get(), "engine heuristics");
  // How many results, then that many configs, created by us and filled by cuDNN.
  const int64_t count = std::min<int64_t>(get_attr(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, nullptr),
                                          256);
  std::vector<BackendDesc> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t got = 0;
  if (count > 0)
    got = std::min(count, get_attr(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count, raw.data()));
  st.heuristics.push_back(std::move(heur));
  configs.resize(static_cast<size_t>(std::max<int64_t>(got, 0)));
  return configs;
}

// The execution plan of `config` as a candidate named `name`; nullopt when its workspace exceeds
// `limit`. Throws when the plan does not finalize.
std::optional<Candidate> plan_candidate(cudnnHandle_t h, BackendDesc& config, std::string name,
                                        int64_t limit) {
  Candidate c;
  c.plan = BackendDesc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  // The handle attribute: as for the operation graph.
  set_attr(c.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  cudnnBackendDescriptor_t raw = config.get();
  set_attr(c.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           &raw);
  finalize(c.plan.get(), "execution plan");
  get_attr(c.plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
           &c.workspace);
  if (c.workspace < 0 || c.workspace > limit) return std::nullopt;
  c.config = std::move(config);
  c.name = std::move(name);
  return c;
}

// Appends the configs of one heuristics mode that qualify (not runtime-compiled, deterministic,
// not seen yet, plan finalizes, workspace within `limit`) until there are kMaxCandidates.
void add_candidates(cudnnHandle_t h, BackendState& st, cudnnBackendHeurMode_t mode, int64_t limit,
                    std::set<std::string>& seen) {
  std::vector<BackendDesc> configs = heuristic_configs(st, mode);
  for (size_t i = 0; i < configs.size() && st.candidates.size() < kMaxCandidates; ++i) {
    try {
      ConfigInfo info = describe_config(configs[i].get());
      if (info.runtime_compiled || info.nondeterministic || !seen.insert(info.name).second)
        continue;
      if (std::optional<Candidate> c = plan_candidate(h, configs[i], std::move(info.name), limit))
        st.candidates.push_back(std::move(*c));
    } catch (const Error&) {
      // This config only: heuristics list configs whose plans then do not finalize.
    }
  }
}

// The config named `name` (describe_config's name) among the heuristics' lists (modes A, then B),
// planned; nullopt when neither lists it or its plan does not finalize within `limit`.
std::optional<Candidate> find_candidate(cudnnHandle_t h, BackendState& st, const std::string& name,
                                        int64_t limit) {
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B}) {
    try {
      std::vector<BackendDesc> configs = heuristic_configs(st, mode);
      for (BackendDesc& config : configs) {
        const ConfigInfo info = describe_config(config.get());
        if (info.name != name || info.runtime_compiled || info.nondeterministic) continue;
        return plan_candidate(h, config, info.name, limit);
      }
    } catch (const Error&) {
      // The other mode may still list it.
    }
  }
  return std::nullopt;
}

// Runs a plan on the operands (the workspace holds c.workspace bytes). False when cuDNN refuses;
// never throws.
bool execute_plan(cudnnHandle_t h, const Candidate& c, const Operands& o, void* workspace) {
  try {
    BackendDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    const std::array<int64_t, 3> uids{kUidX, kUidW, kUidY};
    // The pack stores non-const pointers; x and w are only read.
    const std::array<void*, 3> ptrs{const_cast<void*>(o.x), const_cast<void*>(o.w), o.y};
    set_attr(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data());
    set_attr(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3,
             ptrs.data());
    set_attr(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    finalize(pack.get(), "variant pack");
    return cudnnBackendExecute(h, c.plan.get(), pack.get()) == CUDNN_STATUS_SUCCESS;
  } catch (const Error&) {
    return false;
  }
}

// Times calls on one stream with a pair of CUDA events (the host waits for each).
class StreamTimer {
 public:
  explicit StreamTimer(Stream s) : stream_(s) {
    if (cudaEventCreate(&start_) != cudaSuccess || cudaEventCreate(&stop_) != cudaSuccess) {
      (void)cudaGetLastError();
      destroy();
      fail("cuDNN backend: cannot create timing events");
    }
  }
  ~StreamTimer() { destroy(); }
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  // The faster of two timed runs after an untimed warm-up (which absorbs one-time costs such as
  // loading the kernel's module), in ms; -1 when a run fails.
  template <typename Run>
  float best_of_two(const Run& run) {
    if (once(run) < 0) return -1.f;
    const float a = once(run), b = once(run);
    return a < 0 || b < 0 ? -1.f : std::min(a, b);
  }

 private:
  template <typename Run>
  float once(const Run& run) {
    LTX_CUDA_CHECK(cudaEventRecord(start_, stream_.handle()));
    const bool ok = run();
    LTX_CUDA_CHECK(cudaEventRecord(stop_, stream_.handle()));
    LTX_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.f;
    LTX_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ok ? ms : -1.f;
  }
  void destroy() {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    start_ = stop_ = nullptr;
  }
  Stream stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// What one run_forward call works with.
struct ConvCall {
  int device;
  cudnnHandle_t handle;
  Stream stream;
  const Geometry& g;
  const Descriptors& d;
  AlgoChoice algo;
  float beta;
  Operands ops;
};

// A geometry's decision (per mode and beta): a backend plan, or the legacy algorithm.
struct ConvChoice {
  AlgoChoice legacy;                      // cudnnFind's pick: the fallback, always ready
  float legacy_ms = -1.f;                 // timed by choose_backend (-1: not timed)
  std::unique_ptr<BackendState> backend;  // null: the legacy path
  std::string best_backend;               // the fastest plan and its time, also when slower
  float backend_ms = -1.f;
  std::string note;                       // why the legacy path, when it is
  mutable std::atomic<bool> failed{false};  // the plan failed at run time: legacy for good

  const Candidate* plan() const {
    return backend && !failed.load(std::memory_order_relaxed) ? &backend->candidates.front()
                                                              : nullptr;
  }
};

// Builds the graph and candidates of call.g and times them and the legacy algorithm once: with
// beta 0 on the caller's y (the real call overwrites it next), with beta 1 on a scratch output
// (every run accumulates; x and w are the caller's, only read). Keeps the fastest plan when it beats the legacy algorithm (kForced: in
// any case). Never throws: a failure leaves `choice` on the legacy path, with the reason.
void choose_backend(ConvChoice& choice, CudnnBackendMode mode, const ConvCall& call) {
  try {
    auto st = std::make_unique<BackendState>();
    build_graph(call.handle, call.g, call.beta, st->graph);
    // Plans with more workspace than this are not considered: the winners measured on the VAE's
    // convs need 0-16 MiB, and a larger one would raise the decode's peak memory.
    constexpr int64_t kPlanWorkspaceCap = int64_t{256} << 20;
    const int64_t limit =
        std::min(static_cast<int64_t>(workspace_limit(call.device)), kPlanWorkspaceCap);
    std::set<std::string> seen;
    for (const cudnnBackendHeurMode_t heur : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B}) {
      if (st->candidates.size() >= kMaxCandidates) break;
      try {
        add_candidates(call.handle, *st, heur, limit, seen);
      } catch (const Error&) {
        // The other mode may still offer plans.
      }
    }
    if (st->candidates.empty()) {
      choice.note = "no plan qualifies";
      return;
    }

    size_t y_bytes = sizeof(uint16_t);  // bf16
    for (const int v : call.g.y) y_bytes *= static_cast<size_t>(v);
    size_t workspace_bytes = choice.legacy.workspace;
    for (const Candidate& c : st->candidates)
      workspace_bytes = std::max(workspace_bytes, static_cast<size_t>(c.workspace));
    // beta 0: the timing runs write the caller's y, which the real call then overwrites (no
    // second output buffer, so the peak memory does not rise). beta 1 reads and accumulates
    // into y: a zeroed scratch output then (the boundary frames', a single frame).
    std::shared_ptr<void> y_scratch;
    void* y = call.ops.y;
    if (call.beta != 0.f) {
      y_scratch = allocate(y_bytes, call.stream);
      LTX_CUDA_CHECK(cudaMemsetAsync(y_scratch.get(), 0, y_bytes, call.stream.handle()));
      y = y_scratch.get();
    }
    const std::shared_ptr<void> workspace = allocate(workspace_bytes, call.stream);
    const Operands scratch{call.ops.x, call.ops.w, y};

    g_timed_searches.fetch_add(1, std::memory_order_relaxed);
    StreamTimer timer(call.stream);
    choice.legacy_ms = timer.best_of_two([&] {
      return legacy_forward(call.handle, call.d, choice.legacy, scratch, workspace.get(),
                            call.beta) == CUDNN_STATUS_SUCCESS;
    });
    Candidate* best = nullptr;
    for (Candidate& c : st->candidates) {
      // A plan cuDNN refuses to run is dropped; the others may still run.
      c.ms = timer.best_of_two(
          [&] { return execute_plan(call.handle, c, scratch, workspace.get()); });
      if (c.ms >= 0 && (best == nullptr || c.ms < best->ms)) best = &c;
    }
    if (best == nullptr) {
      choice.note = "no plan ran";
      return;
    }
    choice.best_backend = best->name;
    choice.backend_ms = best->ms;
    if (mode == CudnnBackendMode::kTimed && choice.legacy_ms >= 0 &&
        !(best->ms < choice.legacy_ms)) {
      choice.note = "slower";
      return;
    }
    Candidate kept = std::move(*best);
    st->candidates.clear();
    st->candidates.push_back(std::move(kept));
    choice.backend = std::move(st);
  } catch (const Error& e) {
    choice.backend.reset();
    choice.note = e.what();
  }
}

using ConvKey = std::tuple<int, std::array<int, kDims>, std::array<int, kDims>, std::array<int, 3>,
                           std::array<int, 3>, std::array<int, 3>, int, float, CudnnBackendMode>;

ConvKey conv_key(const ConvCall& call, CudnnBackendMode mode) {
  const Geometry& g = call.g;
  return ConvKey{call.device, g.x, g.w, g.pad, g.stride, g.dilation, g.groups, call.beta, mode};
}

// The cached decision of the call's key, made on first use (never freed, like the handles). Null
// while the stream is being captured into a CUDA graph and no decision exists yet: timing would
// synchronise a capturing stream, so that call takes the legacy path and decides nothing.
std::mutex g_choice_mu;
std::map<ConvKey, const ConvChoice*>& choice_cache() {
  static auto* cache = new std::map<ConvKey, const ConvChoice*>();
  return *cache;
}

// The tuning cache's key of a timed backend decision (kTimed only: the other modes do not time).
std::string backend_entry_key(const ConvCall& call) {
  return str("backend beta ", call.beta, " ", geometry_key(call.g));
}

// The stored decision of a kTimed geometry into `choice`: "plan NAME ms T legacy_ms L" (the plan
// rebuilt from cuDNN's heuristics lists, where it came from) or "legacy ms T legacy_ms L note N"
// (the legacy path was faster, or no plan ran). False when there is none or the plan cannot be
// rebuilt (the caller then times afresh). Never throws.
bool restore_choice(ConvChoice& choice, const ConvCall& call) {
  const std::optional<std::string> v = conv_tuning::lookup(call.device, backend_entry_key(call));
  if (!v) return false;
  std::istringstream in(*v);
  std::string kind, word, name, note;
  float ms = -1.f, legacy_ms = -1.f;
  in >> kind;
  if (kind == "plan") in >> name;
  while (in >> word) {
    if (word == "ms") in >> ms;
    if (word == "legacy_ms") in >> legacy_ms;
    if (word == "note") std::getline(in >> std::ws, note);
  }
  if (kind == "legacy") {
    choice.backend_ms = ms;
    choice.legacy_ms = legacy_ms;
    choice.note = (note.empty() ? std::string("slower") : note) + " (tuning cache)";
    return true;
  }
  if (kind != "plan" || name.empty()) return false;
  try {
    auto st = std::make_unique<BackendState>();
    build_graph(call.handle, call.g, call.beta, st->graph);
    constexpr int64_t kPlanWorkspaceCap = int64_t{256} << 20;  // as choose_backend
    const int64_t limit =
        std::min(static_cast<int64_t>(workspace_limit(call.device)), kPlanWorkspaceCap);
    std::optional<Candidate> c = find_candidate(call.handle, *st, name, limit);
    if (!c) return false;
    st->candidates.push_back(std::move(*c));
    choice.backend = std::move(st);
    choice.best_backend = name;
    choice.backend_ms = ms;
    choice.legacy_ms = legacy_ms;
    return true;
  } catch (const Error&) {
    return false;
  }
}

// Keeps a fresh kTimed decision for later processes: a plan, or the legacy path for a reason that
// will hold next time (not for an error).
void store_choice(const ConvChoice& choice, const ConvCall& call) {
  std::string value;
  if (choice.backend != nullptr) {
    value = str("plan ", choice.backend->candidates.front().name, " ms ", choice.backend_ms,
                " legacy_ms ", choice.legacy_ms);
  } else if (choice.note == "slower" || choice.note == "no plan qualifies") {
    value = str("legacy ms ", choice.backend_ms, " legacy_ms ", choice.legacy_ms, " note ", choice.note);
  } else {
    return;
  }
  conv_tuning::store(call.device, backend_entry_key(call), value);
}

const ConvChoice* conv_choice(const ConvKey& key, CudnnBackendMode mode, const ConvCall& call) {
  {
    std::lock_guard<std::mutex> lock(g_choice_mu);
    const auto it = choice_cache().find(key);
    if (it != choice_cache().end()) return it->second;
  }
  auto choice = std::make_unique<ConvChoice>();
  choice->legacy = call.algo;
  if (mode == CudnnBackendMode::kOff) {
    choice->note = "off";
  } else if (call.g.groups != 1) {
    // cuDNN's backend derives groups from C / (the filter's C); not needed by our models, so the
    // legacy API (an explicit group count) keeps them.
    choice->note = "grouped conv";
  } else if (mode == CudnnBackendMode::kTimed && restore_choice(*choice, call)) {
    // Decided by an earlier process (nothing timed).
  } else {
    if (is_capturing(call.stream)) return nullptr;
    choose_backend(*choice, mode, call);
    if (mode == CudnnBackendMode::kTimed) store_choice(*choice, call);
  }
  std::lock_guard<std::mutex> lock(g_choice_mu);
  const auto [it, inserted] = choice_cache().emplace(key, choice.get());
  if (inserted) choice.release();  // another thread's decision wins a race
  return it->second;
}

// LTX_CUDNN_STATS=1: every geometry's calls, path and times, printed to stderr at exit as
// `cudnn-conv N C D H W O kD kH kW padD padH padW calls # ...` lines, heaviest first (the part
// before '#' is the input format of tools/bench/cudnn_conv_engines_probe.cpp). Off by default:
// one map lookup per convolution when on.
struct GeometryStats {
  const ConvChoice* choice = nullptr;  // null while undecided (graph capture)
  AlgoChoice legacy;
  int64_t backend_calls = 0, legacy_calls = 0;

  // The legacy algorithm's time: as timed here, else cudnnFind's.
  float legacy_ms() const {
    return choice != nullptr && choice->legacy_ms >= 0 ? choice->legacy_ms : legacy.measured_ms;
  }
  // calls x time (an unknown time, -1, counts as 0).
  double total_ms() const {
    const double backend = choice != nullptr ? std::max(0.f, choice->backend_ms) : 0.0;
    return double(backend_calls) * backend + double(legacy_calls) * std::max(0.f, legacy_ms());
  }
};

bool stats_enabled() {
  static const bool on = env::settings().cudnn_stats;
  return on;
}

std::map<ConvKey, GeometryStats>& stats_table() {
  static auto* table = new std::map<ConvKey, GeometryStats>();
  return *table;
}

// "backend engine E[knobs] X ms (legacy algo N Y ms)" or "legacy algo N Y ms (backend ...)".
std::string describe_path(const GeometryStats& st) {
  const ConvChoice* c = st.choice;
  const auto ms = [](double v) {
    char buf[32] = "? ms";
    if (v >= 0) std::snprintf(buf, sizeof(buf), "%.4f ms", v);
    return std::string(buf);
  };
  const std::string legacy =
      str("legacy algo ", int(st.legacy.algo), " ", ms(st.legacy_ms()),
          c != nullptr && c->legacy_ms >= 0 ? "" : " (cudnnFind)");
  if (c != nullptr && c->backend != nullptr) {
    const std::string backend =
        str("backend engine ", c->backend->candidates.front().name, " ", ms(c->backend_ms));
    if (c->failed) return str(legacy, " (", backend, " failed at run time)");
    return str(backend, " (", legacy, ")");
  }
  if (c == nullptr) return str(legacy, " (undecided: graph capture)");
  if (!c->best_backend.empty())
    return str(legacy, " (backend ", c->best_backend, " ", ms(c->backend_ms), ": ", c->note, ")");
  return str(legacy, " (backend: ", c->note, ")");
}

void print_stats() {
  std::vector<std::pair<ConvKey, GeometryStats>> rows(stats_table().begin(), stats_table().end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.total_ms() > b.second.total_ms(); });
  double sum = 0;
  for (const auto& row : rows) sum += row.second.total_ms();
  std::fprintf(stderr,
               "# cuDNN convolutions (LTX_CUDNN_STATS): %zu geometries, ~%.1f ms at the measured "
               "times\n",
               rows.size(), sum);
  for (const auto& [key, st] : rows) {
    const auto& [device, x, w, pad, stride, dilation, groups, beta, mode] = key;
    (void)mode;
    std::fprintf(stderr,
                 "cudnn-conv %d %d %d %d %d %d %d %d %d %d %d %d %lld # %s; calls %lld backend "
                 "%lld legacy; beta %g workspace %zu B total %.1f ms stride %d,%d,%d dilation "
                 "%d,%d,%d groups %d device %d\n",
                 x[0], x[1], x[2], x[3], x[4], w[0], w[2], w[3], w[4], pad[0], pad[1], pad[2],
                 static_cast<long long>(st.backend_calls + st.legacy_calls),
                 describe_path(st).c_str(), static_cast<long long>(st.backend_calls),
                 static_cast<long long>(st.legacy_calls), double(beta),
                 st.choice != nullptr && st.choice->plan() != nullptr
                     ? static_cast<size_t>(st.choice->plan()->workspace)
                     : st.legacy.workspace,
                 st.total_ms(), stride[0], stride[1], stride[2], dilation[0], dilation[1],
                 dilation[2], groups, device);
  }
}

void count_call(const ConvKey& key, const ConvChoice* choice, const AlgoChoice& algo,
                bool ran_backend) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  static const bool registered = [] { return std::atexit(print_stats) == 0; }();
  (void)registered;
  GeometryStats& st = stats_table()[key];
  if (choice != nullptr) st.choice = choice;
  st.legacy = algo;
  ++(ran_backend ? st.backend_calls : st.legacy_calls);
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
                        const ops::ConvSpec& spec) {
  if (x.dtype() != DType::BF16 || w.dtype() != DType::BF16) return false;
  if (bias.defined() && bias.dtype() != DType::BF16) return false;
  if (spec.rank < 1 || spec.rank > 3 || !fits_int32(x) || !fits_int32(w)) return false;
  const ops::ConvGeometry c = ops::conv_geometry(x, w, spec, false);
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
// Runs the geometry's backend plan when it has one (conv_choice), else the legacy algorithm.
void run_forward(int device, const Geometry& g, const Tensor& x, const Tensor& w, const Tensor& y,
                 float beta) {
  const Stream stream = current_stream(device);
  cudnnHandle_t h = handle_for(device);
  const Descriptors d(g);
  const Operands ops{x.raw_data(), w.raw_data(), y.raw_data()};
  const ConvCall call{device, h, stream, g, d, choose_algorithm(device, g, d), beta, ops};
  const CudnnBackendMode mode = effective_mode();
  const ConvKey key = conv_key(call, mode);
  const ConvChoice* choice = conv_choice(key, mode, call);
  const Candidate* plan = choice != nullptr ? choice->plan() : nullptr;
  // The plans were built for 16-byte aligned operands (channels_last_operand's guarantee; a
  // misaligned caller takes the legacy path, which declares no alignment).
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  bool ran_backend = false;
  if (plan != nullptr && aligned(call.ops.x) && aligned(call.ops.w) && aligned(call.ops.y)) {
    std::shared_ptr<void> workspace;
    if (plan->workspace > 0) workspace = allocate(static_cast<size_t>(plan->workspace), stream);
    ran_backend = execute_plan(h, *plan, call.ops, workspace.get());
    if (ran_backend) {
      g_backend_executions.fetch_add(1, std::memory_order_relaxed);
    } else {
      choice->failed = true;  // cuDNN refused the plan: this geometry stays on the legacy path
    }
  }
  if (stats_enabled()) count_call(key, choice, call.algo, ran_backend);
  if (ran_backend) return;
  std::shared_ptr<void> workspace;
  if (call.algo.workspace > 0) workspace = allocate(call.algo.workspace, stream);
  const cudnnStatus_t status = legacy_forward(h, d, call.algo, call.ops, workspace.get(), beta);
  LTX_CHECK(status == CUDNN_STATUS_SUCCESS, "cuDNN convolution (algorithm ", int(call.algo.algo),
            ", workspace ", call.algo.workspace, " B, beta ", beta, ") failed: ",
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
    if (bias.defined()) binary_inplace(ops::BinaryOp::Add, out, bias.view(bias_shape));
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
  for (int64_t t = t0 + 1; t < t1; ++t)
    acc = cuda::binary(ops::BinaryOp::Add, acc, w.narrow(2, t, 1));
  return channels_last_operand(acc.to(DType::BF16));
}

}  // namespace

Tensor cudnn_conv_nd(const Tensor& x_in, const Tensor& w_in, const Tensor& bias,
                     const ops::ConvSpec& spec) {
  const int device = x_in.device().index;
  DeviceGuard guard(device);
  const ops::ConvGeometry c = ops::conv_geometry(x_in, w_in, spec, false);
  const Shape out_shape = ops::conv_output_shape(c, spec.rank);
  const bool keep_last = channels_last_input(x_in);
  const Tensor out = empty_channels_last(out_shape, x_in.device());
  if (out_shape.numel() == 0) return finish(out, Tensor(), keep_last);
  run_forward(device, geometry(c), channels_last_operand(x_in), channels_last_operand(w_in), out,
              0.f);
  return finish(out, bias, keep_last);
}

void set_cudnn_backend_mode(CudnnBackendMode mode) {
  g_mode.store(static_cast<int>(mode), std::memory_order_relaxed);
}

int64_t cudnn_backend_executions() { return g_backend_executions.load(std::memory_order_relaxed); }

int64_t cudnn_conv_timed_searches() { return g_timed_searches.load(std::memory_order_relaxed); }

void forget_cudnn_conv_choices_for_tests() {
  // The old choices are leaked, not freed: the stats table may still point at them.
  {
    std::lock_guard<std::mutex> lock(g_choice_mu);
    choice_cache().clear();
  }
  std::lock_guard<std::mutex> lock(g_algo_mu);
  algo_cache().clear();
}

bool cudnn_replicate_time_applies(const Tensor& x, const Tensor& w, const Tensor& bias,
                                  const ops::ConvSpec& spec, int64_t pad_front, int64_t pad_back) {
  if (spec.rank != 3 || x.dim() != 5 || w.dim() != 5 || spec.groups != 1) return false;
  const int64_t k = w.size(2), p = k / 2;
  if (pad_front != p || pad_back != p || p < 1 || spec.stride[0] != 1 || spec.dilation[0] != 1 ||
      spec.padding[0] != 0 || x.size(2) < 1)
    return false;
  ops::ConvSpec padded = spec;
  padded.padding[0] = p;  // the conv the fold runs
  return cudnn_conv_applies(x, w, bias, padded);
}

Tensor cudnn_conv3d_replicate_time(const Tensor& x_in, const Tensor& w_in, const Tensor& bias,
                                   const ops::ConvSpec& spec, int64_t pad_front,
                                   int64_t pad_back) {
  LTX_CHECK(cudnn_replicate_time_applies(x_in, w_in, bias, spec, pad_front, pad_back),
            "conv3d_replicate_time (cuDNN): the fold does not apply to input ", x_in.describe(),
            ", weight ", w_in.describe(), ", temporal pads ", pad_front, "/", pad_back,
            "; call ops::conv3d_replicate_time, which falls back to pad + conv3d");
  const int device = x_in.device().index;
  DeviceGuard guard(device);
  const int64_t k = w_in.size(2), p = k / 2, T = x_in.size(2), N = x_in.size(0);
  // 1. The conv with zero temporal padding p: every tap that reads a real frame.
  ops::ConvSpec main = spec;
  main.padding[0] = p;
  const ops::ConvGeometry c = ops::conv_geometry(x_in, w_in, main, false);
  const Shape out_shape = ops::conv_output_shape(c, 3);
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
  ops::ConvSpec frame = spec;  // spatial padding / stride / dilation as given, 1 frame in time
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
        run_forward(device, geometry(ops::conv_geometry(xs, ws, frame, false)), xs, ws, ys, 1.f);
      }
    }
  }
  return finish(out, bias, keep_last);
}

}  // namespace ltx::cuda

// Local to this file (unity builds compile it together with others).
#undef LTX_CUDNN_CHECK
