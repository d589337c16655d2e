#include "backend/cuda/copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/host_upload.h"
#include "backend/cuda/launch.h"
#include "core/dtype_element.h"
#include "core/error.h"
#include "core/op_observer.h"

namespace ltx::cuda {

namespace {

constexpr int kThreads = 256;

// Shape and element strides of dst and src after dropping size-1 dims and merging dims that are
// contiguous with their inner neighbour on both sides.
struct Layout {
  int nd = 0;
  int64_t size[kMaxDims] = {};
  int64_t ss[kMaxDims] = {};  // src strides (elements)
  int64_t ds[kMaxDims] = {};  // dst strides (elements)
};

// Dims are taken in dst's memory order (decreasing stride), so that the writes are coalesced and
// two tensors of one permuted layout (channels-last narrow / concat) merge like contiguous ones;
// for a row-major dst that is the logical order.
Layout collapse(const Tensor& dst, const Tensor& src) {
  Layout l;
  const std::vector<int64_t> order = dst.dim_order();
  for (const int64_t od : order) {
    const int d = static_cast<int>(od);
    const int64_t n = dst.size(d);
    if (n == 1) continue;
    if (l.nd > 0 && l.ss[l.nd - 1] == src.stride(d) * n && l.ds[l.nd - 1] == dst.stride(d) * n) {
      l.size[l.nd - 1] *= n;
      l.ss[l.nd - 1] = src.stride(d);
      l.ds[l.nd - 1] = dst.stride(d);
      continue;
    }
    l.size[l.nd] = n;
    l.ss[l.nd] = src.stride(d);
    l.ds[l.nd] = dst.stride(d);
    ++l.nd;
  }
  if (l.nd == 0) {  // one element
    l.nd = 1;
    l.size[0] = 1;
    l.ss[0] = 1;
    l.ds[0] = 1;
  }
  return l;
}

// Offsets (in elements) of logical element i on both sides.
template <typename IndexT>
__device__ __forceinline__ void offsets(const Layout& l, IndexT i, int64_t* so, int64_t* dof) {
  int64_t s = 0, d = 0;
  IndexT rem = i;
  for (int k = l.nd - 1; k >= 0; --k) {
    const IndexT n = static_cast<IndexT>(l.size[k]);
    const IndexT idx = rem % n;
    rem /= n;
    s += static_cast<int64_t>(idx) * l.ss[k];
    d += static_cast<int64_t>(idx) * l.ds[k];
  }
  *so = s;
  *dof = d;
}

// Same dtype: moves T-sized elements (T is an unsigned integer of the element's width).
template <typename T, typename IndexT>
__global__ void strided_copy_kernel(const T* __restrict__ src, T* __restrict__ dst, Layout l,
                                    IndexT n) {
  for (IndexT i = static_cast<IndexT>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<IndexT>(gridDim.x) * blockDim.x) {
    int64_t so, dof;
    offsets(l, i, &so, &dof);
    dst[dof] = src[so];
  }
}

// Any dtype pair, through the shared element conversion.
template <typename IndexT>
__global__ void strided_convert_kernel(const char* __restrict__ src, DType st, int ssize,
                                       char* __restrict__ dst, DType dt, int dsize, Layout l,
                                       IndexT n) {
  for (IndexT i = static_cast<IndexT>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<IndexT>(gridDim.x) * blockDim.x) {
    int64_t so, dof;
    offsets(l, i, &so, &dof);
    dtype_bits::convert_element(src + so * ssize, st, dst + dof * dsize, dt);
  }
}

// Both sides dense: no index arithmetic.
__global__ void dense_convert_kernel(const char* __restrict__ src, DType st, int ssize,
                                     char* __restrict__ dst, DType dt, int dsize, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dtype_bits::convert_element(src + i * ssize, st, dst + i * dsize, dt);
  }
}

// e4m3 -> bf16, both dense: the fp8-cast upcast of every quantized weight at each forward, so
// it runs at memory speed: eight elements a thread (one 8-byte load, one 16-byte store), each
// converted exactly as convert_element does.
__global__ void e4m3_to_bf16_x8_kernel(const uint2* __restrict__ src, uint4* __restrict__ dst,
                                       int64_t n8) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n8;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint2 v = src[i];
    uint32_t out[4];
    for (int k = 0; k < 4; ++k) {
      const uint32_t pair = (k < 2 ? v.x : v.y) >> (16 * (k % 2));  // elements 2k, 2k + 1
      const uint32_t lo = dtype_bits::f32_to_bf16(dtype_bits::f8e4m3fn_to_f32(pair & 0xffu));
      const uint32_t hi =
          dtype_bits::f32_to_bf16(dtype_bits::f8e4m3fn_to_f32((pair >> 8) & 0xffu));
      out[k] = lo | (hi << 16);
    }
    dst[i] = make_uint4(out[0], out[1], out[2], out[3]);
  }
}

unsigned grid_for(int64_t n, int device) { return cuda::grid_for(n, kThreads, device); }

// Largest offset reachable on either side, to decide whether 32-bit index math is enough.
bool fits_32bit(const Layout& l, int64_t n) {
  if (n >= (int64_t{1} << 31)) return false;
  int64_t smax = 0, dmax = 0;
  for (int k = 0; k < l.nd; ++k) {
    smax += (l.size[k] - 1) * l.ss[k];
    dmax += (l.size[k] - 1) * l.ds[k];
  }
  return smax < (int64_t{1} << 31) && dmax < (int64_t{1} << 31);
}

template <typename T, typename IndexT>
void launch_copy(const Tensor& dst, const Tensor& src, const Layout& l, int64_t n, Stream s) {
  strided_copy_kernel<T, IndexT><<<grid_for(n, s.device()), kThreads, 0, s.handle()>>>(
      static_cast<const T*>(src.raw_data()), static_cast<T*>(dst.raw_data()), l,
      static_cast<IndexT>(n));
}

template <typename IndexT>
void launch_strided(const Tensor& dst, const Tensor& src, const Layout& l, int64_t n, Stream s) {
  if (dst.dtype() == src.dtype()) {
    switch (dst.element_size()) {
      case 1: return launch_copy<uint8_t, IndexT>(dst, src, l, n, s);
      case 2: return launch_copy<uint16_t, IndexT>(dst, src, l, n, s);
      case 4: return launch_copy<uint32_t, IndexT>(dst, src, l, n, s);
      default: return launch_copy<uint64_t, IndexT>(dst, src, l, n, s);
    }
  }
  strided_convert_kernel<IndexT><<<grid_for(n, s.device()), kThreads, 0, s.handle()>>>(
      static_cast<const char*>(src.raw_data()), src.dtype(), static_cast<int>(src.element_size()),
      static_cast<char*>(dst.raw_data()), dst.dtype(), static_cast<int>(dst.element_size()), l,
      static_cast<IndexT>(n));
}

// A same-dtype copy whose innermost dim is dense on both sides, as words of `word` bytes: the
// innermost run, every other stride and both pointers must be multiples of the word. Moves 16
// bytes per thread instead of one element (narrow/concat/contiguous of channels-last tensors).
bool widen(Layout* l, int64_t elem, int64_t word, const void* src, const void* dst) {
  const int last = l->nd - 1;
  if (word <= elem || l->ss[last] != 1 || l->ds[last] != 1 || (l->size[last] * elem) % word != 0 ||
      reinterpret_cast<uintptr_t>(src) % word != 0 || reinterpret_cast<uintptr_t>(dst) % word != 0)
    return false;
  for (int k = 0; k < last; ++k)
    if ((l->ss[k] * elem) % word != 0 || (l->ds[k] * elem) % word != 0) return false;
  for (int k = 0; k < last; ++k) {
    l->ss[k] = l->ss[k] * elem / word;
    l->ds[k] = l->ds[k] * elem / word;
  }
  l->size[last] = l->size[last] * elem / word;
  return true;
}

// The widest word widen() accepts (16, 8 or 4 bytes), as a launch; false when none does.
bool launch_wide_copy(const Tensor& dst, const Tensor& src, const Layout& l, Stream s) {
  if (dst.dtype() != src.dtype()) return false;
  const int64_t elem = dst.element_size();
  for (const int64_t word : {16, 8, 4}) {
    Layout w = l;
    if (!widen(&w, elem, word, src.raw_data(), dst.raw_data())) continue;
    int64_t n = 1;
    for (int k = 0; k < w.nd; ++k) n *= w.size[k];
    const bool narrow_index = fits_32bit(w, n);
    const auto go = [&](auto word_type) {
      using T = decltype(word_type);
      if (narrow_index) {
        launch_copy<T, uint32_t>(dst, src, w, n, s);
      } else {
        launch_copy<T, uint64_t>(dst, src, w, n, s);
      }
    };
    if (word == 16) {
      go(uint4{});
    } else if (word == 8) {
      go(uint2{});
    } else {
      go(uint32_t{});
    }
    return true;
  }
  return false;
}

void memcpy_async(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, Stream s) {
  if (bytes == 0) return;
  LTX_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s.handle()));
}

void host_to_device(const Tensor& dst, const Tensor& src) {
  const int dev = dst.device().index;
  DeviceGuard guard(dev);
  const Stream s = current_stream(dev);
  // A copy recorded into a CUDA graph would read the host buffer again at every replay, long
  // after it is gone (the capture itself accepts it silently).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  LTX_CUDA_CHECK(cudaStreamIsCapturing(s.handle(), &capture));
  LTX_CHECK(capture == cudaStreamCaptureStatusNone, "copy from host memory into ", dst.describe(),
            " while a CUDA graph is recorded: a replay would read the host buffer after it is "
            "gone; make the value a device constant (core/constant_cache.h) or a graph input");
  // upload_to_device returns once the host bytes are read (large pageable sources through the
  // page-locked staging buffers), so a temporary contiguous host copy may be released right after.
  const Tensor hsrc = src.contiguous();
  if (dst.is_contiguous() && dst.dtype() == src.dtype()) {
    upload_to_device(dst.raw_data(), hsrc.raw_data(), dst.nbytes(), s);
    return;
  }
  const Tensor staged = Tensor::empty(src.shape(), src.dtype(), dst.device());
  upload_to_device(staged.raw_data(), hsrc.raw_data(), staged.nbytes(), s);
  convert_on_device(dst, staged, s);
}

void device_to_host(const Tensor& dst, const Tensor& src) {
  const int dev = src.device().index;
  DeviceGuard guard(dev);
  const Stream s = current_stream(dev);
  Tensor dsrc = src;
  if (!(src.is_contiguous() && src.dtype() == dst.dtype())) {
    dsrc = Tensor::empty(src.shape(), dst.dtype(), src.device());
    convert_on_device(dsrc, src, s);
  }
  if (dst.is_contiguous()) {
    memcpy_async(dst.raw_data(), dsrc.raw_data(), dst.nbytes(), cudaMemcpyDeviceToHost, s);
    s.synchronize();
    return;
  }
  const Tensor host = Tensor::empty(dst.shape(), dst.dtype(), Device::cpu());
  memcpy_async(host.raw_data(), dsrc.raw_data(), host.nbytes(), cudaMemcpyDeviceToHost, s);
  s.synchronize();
  dst.copy_from(host);
}

void device_to_other_device(const Tensor& dst, const Tensor& src) {
  const int sdev = src.device().index, ddev = dst.device().index;
  const Stream ss = current_stream(sdev), ds = current_stream(ddev);
  Tensor csrc = src;
  if (!src.is_contiguous()) {
    csrc = Tensor::empty(src.shape(), src.dtype(), src.device());
    convert_on_device(csrc, src, ss);
  }
  // The destination stream waits for the source's producers...
  Event ready;
  ready.record(ss);
  ready.wait(ds);
  const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
  const Tensor target = direct ? dst : Tensor::empty(src.shape(), src.dtype(), dst.device());
  {
    DeviceGuard guard(ddev);
    LTX_CUDA_CHECK(cudaMemcpyPeerAsync(target.raw_data(), ddev, csrc.raw_data(), sdev,
                                       target.nbytes(), ds.handle()));
  }
  // ...and the source stream waits for the transfer, so csrc's block is reused only after it.
  Event done;
  done.record(ds);
  done.wait(ss);
  if (!direct) convert_on_device(dst, target, ds);
}

template <typename T>
__global__ void fill_kernel(T* __restrict__ dst, T value, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <typename T>
void launch_fill(void* dst, const void* element, int64_t n, Stream s) {
  T value;
  std::memcpy(&value, element, sizeof(T));
  fill_kernel<T><<<grid_for(n, s.device()), kThreads, 0, s.handle()>>>(static_cast<T*>(dst), value, n);
  LTX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill(const Tensor& dst, const void* element) {
  const OpScope op_scope("fill (on device)");
  LTX_CHECK(dst.device().is_cuda(), "cuda::fill: ", dst.describe(), " is not on a CUDA device");
  const int64_t n = dst.numel();
  if (n == 0) return;
  const int dev = dst.device().index;
  DeviceGuard guard(dev);
  const Stream s = current_stream(dev);
  if (!dst.is_contiguous()) {
    // Fill a dense buffer, then scatter it with the strided copy.
    const Tensor dense = Tensor::empty(dst.shape(), dst.dtype(), dst.device());
    fill(dense, element);
    convert_on_device(dst, dense, s);
    return;
  }
  const size_t es = dst.element_size();
  const auto* bytes = static_cast<const unsigned char*>(element);
  if (std::all_of(bytes, bytes + es, [](unsigned char b) { return b == 0; })) {
    LTX_CUDA_CHECK(cudaMemsetAsync(dst.raw_data(), 0, dst.nbytes(), s.handle()));
    return;
  }
  switch (es) {
    case 1: launch_fill<uint8_t>(dst.raw_data(), element, n, s); break;
    case 2: launch_fill<uint16_t>(dst.raw_data(), element, n, s); break;
    case 4: launch_fill<uint32_t>(dst.raw_data(), element, n, s); break;
    case 8: launch_fill<uint64_t>(dst.raw_data(), element, n, s); break;
    default: fail("cuda::fill: unsupported element size ", es, " for ", dst.describe());
  }
}

void convert_on_device(const Tensor& dst, const Tensor& src, Stream stream) {
  const OpScope op_scope("copy (on device)");
  // The profile splits copies by shape, dtypes and whether each side is dense.
  if (op_scope.observed())
    op_scope.detail(src.shape().str() + " " + dtype_name(src.dtype()) +
                    (src.is_contiguous() ? "" : "(strided)") + "->" + dtype_name(dst.dtype()) +
                    (dst.is_contiguous() ? "" : "(strided)"));
  LTX_CHECK(dst.device().is_cuda() && src.device() == dst.device() &&
                stream.device() == dst.device().index,
            "convert_on_device: expected both tensors and the stream on one CUDA device, got ",
            dst.describe(), " <- ", src.describe(), " on a stream of cuda:", stream.device());
  LTX_CHECK(dst.shape() == src.shape(), "convert_on_device: shape mismatch, destination ",
            dst.describe(), ", source ", src.describe());
  const int64_t n = dst.numel();
  if (n == 0) return;
  DeviceGuard guard(stream.device());
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    memcpy_async(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream);
    return;
  }
  const Layout l = collapse(dst, src);
  const auto aligned = [](const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  if (l.nd == 1 && l.ss[0] == 1 && l.ds[0] == 1 && src.dtype() == DType::F8E4M3FN &&
      dst.dtype() == DType::BF16 && aligned(src.raw_data(), 8) && aligned(dst.raw_data(), 16) &&
      n >= 8) {
    const int64_t n8 = n / 8, tail = n - n8 * 8;
    e4m3_to_bf16_x8_kernel<<<grid_for(n8, stream.device()), kThreads, 0, stream.handle()>>>(
        static_cast<const uint2*>(src.raw_data()), static_cast<uint4*>(dst.raw_data()), n8);
    if (tail > 0)
      dense_convert_kernel<<<1, kThreads, 0, stream.handle()>>>(
          static_cast<const char*>(src.raw_data()) + n8 * 8, src.dtype(), 1,
          static_cast<char*>(dst.raw_data()) + n8 * 16, dst.dtype(), 2, tail);
  } else if (l.nd == 1 && l.ss[0] == 1 && l.ds[0] == 1) {
    dense_convert_kernel<<<grid_for(n, stream.device()), kThreads, 0, stream.handle()>>>(
        static_cast<const char*>(src.raw_data()), src.dtype(),
        static_cast<int>(src.element_size()), static_cast<char*>(dst.raw_data()), dst.dtype(),
        static_cast<int>(dst.element_size()), n);
  } else if (!launch_wide_copy(dst, src, l, stream)) {
    if (fits_32bit(l, n)) {
      launch_strided<uint32_t>(dst, src, l, n, stream);
    } else {
      launch_strided<uint64_t>(dst, src, l, n, stream);
    }
  }
  LTX_CUDA_CHECK_LAUNCH();
}

void copy(const Tensor& dst, const Tensor& src) {
  LTX_CHECK(dst.shape() == src.shape(), "copy: shape mismatch, destination ", dst.describe(),
            ", source ", src.describe());
  if (dst.numel() == 0) return;
  const bool dcuda = dst.device().is_cuda(), scuda = src.device().is_cuda();
  LTX_CHECK(dcuda || scuda, "cuda::copy: neither ", dst.describe(), " nor ", src.describe(),
            " is on a CUDA device");
  if (dcuda && scuda) {
    if (dst.device() == src.device())
      convert_on_device(dst, src, current_stream(dst.device().index));
    else
      device_to_other_device(dst, src);
    return;
  }
  if (dcuda) return host_to_device(dst, src);
  device_to_host(dst, src);
}

}  // namespace ltx::cuda
