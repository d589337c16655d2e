#include "backend/cuda/conv_cudnn.h"

#include <cudnn.h>

#include <array>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cuda/allocator.h"
#include "backend/cuda/device.h"
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

// [N, C, *spatial] -> the same values stored channels-last ([N, *spatial, C] contiguous).
// Channels-last and dense, starting on a 16-byte boundary: a contiguous view into a larger buffer
// (a frame slice, say) can start anywhere, and cuDNN's algorithms may require aligned operands
// (cudnnFind measures them on its own aligned scratch buffers).
Tensor to_channels_last(const Tensor& t) {
  std::vector<int64_t> perm{0};
  for (int i = 2; i < t.dim(); ++i) perm.push_back(i);
  perm.push_back(1);
  const Tensor last = t.permute(perm).contiguous();
  return reinterpret_cast<uintptr_t>(last.raw_data()) % 16 == 0 ? last : last.clone();
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
      best = AlgoChoice{timed[i].algo, timed[i].memory};
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

Tensor cudnn_conv_nd(const Tensor& x_in, const Tensor& w_in, const Tensor& bias,
                     const cpu::ConvSpec& spec) {
  const int device = x_in.device().index;
  DeviceGuard guard(device);
  const cpu::ConvGeometry c = cpu::conv_geometry(x_in, w_in, spec, false);
  const Geometry g = geometry(c);
  const Shape out_shape = cpu::conv_output_shape(c, spec.rank);
  if (out_shape.numel() == 0) return Tensor::empty(out_shape, DType::BF16, x_in.device());
  const Tensor x = to_channels_last(x_in), w = to_channels_last(w_in);
  // The result is computed channels-last, then handed back as a contiguous NC(D)HW tensor.
  Shape last_shape{out_shape[0]};
  for (int i = 2; i < out_shape.size(); ++i) last_shape.push_back(out_shape[i]);
  last_shape.push_back(out_shape[1]);
  Tensor out_last = Tensor::empty(last_shape, DType::BF16, x.device());

  const Stream stream = current_stream(device);
  cudnnHandle_t h = handle_for(device);
  LTX_CUDNN_CHECK(cudnnSetStream(h, stream.handle()));
  const Descriptors d(g);
  const AlgoChoice choice = choose_algorithm(device, g, d);
  std::shared_ptr<void> workspace;
  if (choice.workspace > 0) workspace = allocate(choice.workspace, stream);
  const float alpha = 1.f, beta = 0.f;
  const cudnnStatus_t status =
      cudnnConvolutionForward(h, &alpha, d.x, x.raw_data(), d.w, w.raw_data(), d.conv, choice.algo,
                              workspace.get(), choice.workspace, &beta, d.y, out_last.raw_data());
  LTX_CHECK(status == CUDNN_STATUS_SUCCESS, "cuDNN convolution (algorithm ", int(choice.algo),
            ", workspace ", choice.workspace, " B) failed: ", cudnnGetErrorString(status),
            "; input ", describe(g.x), ", filter ", describe(g.w), ", output ", describe(g.y),
            ", pad ", describe(g.pad), ", stride ", describe(g.stride), ", dilation ",
            describe(g.dilation), ", groups ", g.groups);
  std::vector<int64_t> back{0, out_shape.size() - 1};
  for (int i = 1; i + 1 < out_shape.size(); ++i) back.push_back(i);
  const Tensor out = out_last.permute(back);
  if (!bias.defined()) return out.contiguous();
  // PyTorch adds the bias after cuDNN's convolution too (a separate add in the output dtype); here
  // the add also turns the channels-last result back into NC(D)HW (one pass instead of two).
  Shape bias_shape;
  for (int i = 0; i < out_shape.size(); ++i) bias_shape.push_back(i == 1 ? w.size(0) : 1);
  return ops::add(out, bias.view(bias_shape));
}

}  // namespace ltx::cuda
