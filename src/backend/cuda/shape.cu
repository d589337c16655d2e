#include "backend/cuda/shape.h"

#include <cstring>

#include "backend/cuda/device.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/stream.h"
#include "core/dtype.h"

namespace ltx::cuda {

namespace {

constexpr int kThreads = 256;

struct MapArgs {
  int nd = 0;
  int64_t size[kMaxDims] = {};    // output sizes
  int64_t stride[kMaxDims] = {};  // x's strides (elements)
  const int64_t* map[kMaxDims] = {};  // null: identity, or the dim's pad rule
  bool padded[kMaxDims] = {};         // the dim's source index is pad_source_index(rule)
  ops::PadRule rule[kMaxDims] = {};
  const char* x = nullptr;
  char* out = nullptr;
  uint64_t fill = 0;  // the fill value's bytes
};

template <typename T>
__global__ void gather_by_maps_kernel(MapArgs a, int64_t n) {
  const T fill = static_cast<T>(a.fill);
  const T* x = reinterpret_cast<const T*>(a.x);
  T* out = reinterpret_cast<T*>(a.out);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t rem = i, off = 0;
    bool filled = false;
    for (int d = a.nd - 1; d >= 0; --d) {
      const int64_t o = rem % a.size[d];
      rem /= a.size[d];
      const int64_t m = a.map[d] != nullptr ? a.map[d][o]
                        : a.padded[d]     ? ops::pad_source_index(a.rule[d], o)
                                          : o;
      if (m < 0) filled = true;
      off += m * a.stride[d];
    }
    out[i] = filled ? fill : x[off];
  }
}

template <typename T>
__global__ void gather_kernel(const T* __restrict__ x, T* __restrict__ out,
                              const int64_t* __restrict__ idx, int nd, int dim, MapArgs a,
                              int64_t n) {
  // a.size: the index's (= output's) shape; a.stride: x's strides.
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t rem = i, off = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t c = rem % a.size[d];
      rem /= a.size[d];
      off += (d == dim ? idx[i] : c) * a.stride[d];
    }
    out[i] = x[off];
  }
}

template <template <typename> class Kernel, typename... Args>
void launch_by_size(size_t element_size, int64_t n, int dev, Args... args) {
  const unsigned grid = grid_for(n, kThreads, dev);
  const cudaStream_t s = current_stream(dev).handle();
  switch (element_size) {
    case 1: Kernel<uint8_t>::launch(grid, s, args...); break;
    case 2: Kernel<uint16_t>::launch(grid, s, args...); break;
    case 4: Kernel<uint32_t>::launch(grid, s, args...); break;
    case 8: Kernel<uint64_t>::launch(grid, s, args...); break;
    default: fail("cuda shape ops: unsupported element size ", element_size);
  }
  LTX_CUDA_CHECK_LAUNCH();
}

template <typename T>
struct GatherByMaps {
  static void launch(unsigned grid, cudaStream_t s, const MapArgs& a, int64_t n) {
    gather_by_maps_kernel<T><<<grid, kThreads, 0, s>>>(a, n);
  }
};
template <typename T>
struct Gather {
  static void launch(unsigned grid, cudaStream_t s, const void* x, void* out, const int64_t* idx,
                     int nd, int dim, const MapArgs& a, int64_t n) {
    gather_kernel<T><<<grid, kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out),
                                               idx, nd, dim, a, n);
  }
};

// The fill value's bytes in x's dtype, as the kernel reads them.
uint64_t fill_bits(double fill, DType dtype) {
  alignas(8) unsigned char bytes[8] = {};
  convert_dense(&fill, DType::F64, bytes, dtype, 1);
  uint64_t bits = 0;
  std::memcpy(&bits, bytes, sizeof bits);  // little-endian: low bytes hold the element
  return bits;
}

// The arguments of a gather from x into a new tensor of `out_shape`: every dim read as identity
// until the caller gives it a map or a pad rule.
MapArgs gather_args(const Tensor& x, const Shape& out_shape, double fill) {
  MapArgs a;
  a.nd = x.dim();
  a.fill = fill_bits(fill, x.dtype());
  for (int d = 0; d < x.dim(); ++d) {
    a.size[d] = out_shape[d];
    a.stride[d] = x.stride(d);
  }
  return a;
}

// Runs the gather `a` describes from x into a new tensor of `out_shape`.
Tensor launch_gather(const Tensor& x, const Shape& out_shape, MapArgs& a) {
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  a.x = static_cast<const char*>(x.raw_data());
  a.out = static_cast<char*>(out.raw_data());
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  launch_by_size<GatherByMaps>(x.element_size(), n, dev, a, n);
  return out;
}

}  // namespace

Tensor gather_by_pad_rules(const Tensor& x, const Shape& out_shape,
                           const std::vector<std::pair<int, ops::PadRule>>& rules, double fill) {
  LTX_CHECK(static_cast<int>(out_shape.size()) == x.dim(), "pad (cuda): output shape ",
            out_shape.str(), " for ", x.describe());
  MapArgs a = gather_args(x, out_shape, fill);
  for (const auto& [d, rule] : rules) {
    LTX_CHECK(d >= 0 && d < x.dim(), "pad (cuda): dim ", d, " of ", x.describe());
    a.padded[d] = true;
    a.rule[d] = rule;
  }
  return launch_gather(x, out_shape, a);
}

Tensor gather_by_maps(const Tensor& x, const std::vector<std::vector<int64_t>>& maps, double fill) {
  LTX_CHECK(static_cast<int>(maps.size()) == x.dim(), "gather_by_maps: ", maps.size(),
            " maps for ", x.describe());
  Shape out_shape;
  for (const auto& m : maps) out_shape.push_back(static_cast<int64_t>(m.size()));
  if (out_shape.numel() == 0) return Tensor::empty(out_shape, x.dtype(), x.device());
  MapArgs a = gather_args(x, out_shape, fill);
  // Non-identity maps go to the device in one buffer.
  std::vector<int64_t> packed;
  std::vector<int64_t> start(maps.size(), -1);
  for (size_t d = 0; d < maps.size(); ++d) {
    const auto& m = maps[d];
    bool identity = static_cast<int64_t>(m.size()) == x.size(static_cast<int64_t>(d));
    for (size_t i = 0; identity && i < m.size(); ++i) identity = m[i] == static_cast<int64_t>(i);
    if (identity) continue;
    start[d] = static_cast<int64_t>(packed.size());
    packed.insert(packed.end(), m.begin(), m.end());
  }
  Tensor dev_maps;
  if (!packed.empty()) {
    dev_maps = Tensor::from_vector(packed, {static_cast<int64_t>(packed.size())}).to(x.device());
    const int64_t* base = static_cast<const int64_t*>(dev_maps.raw_data());
    for (size_t d = 0; d < maps.size(); ++d)
      if (start[d] >= 0) a.map[d] = base + start[d];
  }
  // dev_maps is freed after the kernel in stream order (caching allocator).
  return launch_gather(x, out_shape, a);
}

Tensor gather(const Tensor& x, int dim, const Shape& index_shape, const std::vector<int64_t>& idx) {
  Tensor out = Tensor::empty(index_shape, x.dtype(), x.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  const Tensor dev_idx = Tensor::from_vector(idx, index_shape).to(x.device());
  MapArgs a;
  for (int d = 0; d < index_shape.size(); ++d) {
    a.size[d] = index_shape[d];
    a.stride[d] = x.stride(d);
  }
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  launch_by_size<Gather>(x.element_size(), n, dev, x.raw_data(), out.raw_data(),
                         static_cast<const int64_t*>(dev_idx.raw_data()), index_shape.size(), dim,
                         a, n);
  return out;
}

}  // namespace ltx::cuda
