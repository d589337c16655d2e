#pragma once
// The one strided/broadcast elementwise loop of the CUDA backend (the counterpart of
// backend/cpu/elementwise_loop.h), dtype-generic: every operand is loaded as f32 from its own
// storage dtype (f32, bf16, or anything else through the shared conversion), the functor computes
// in f32, and the result is stored in the output's dtype (f32 or bf16, rounded to nearest even).
//
// map_into<K>(out, {&a, &b, ...}, f) computes out[i] = f(v) with v[k] = ins[k][i], the inputs
// broadcast to out's shape. Dims are coalesced first (shared with the CPU loop), so most calls
// become one dense dim, which needs no index arithmetic. `out` may be a strided view and may also
// be one of the inputs (in-place ops) when positions coincide exactly.
//
// Dense fast path: when the coalesced loop is one dim with unit-stride output, every input either
// unit-stride (f32 or bf16, 16-byte aligned) or a broadcast scalar (stride 0), each thread handles
// kVec = 8 consecutive elements with 16-byte loads/stores (two float4 or one uint4 of bf16), and
// the last n % 8 elements run scalar. Same per-element conversions and functor, so the results
// are bit-identical to the strided loop. Broadcast fast path (map_inner_vec_kernel): the same
// vectors along a unit-stride innermost dim with any broadcasting of the outer dims. Anything else
// takes the strided loop.
#include <array>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/device.h"
#include "backend/cuda/fast_div.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/stream.h"
#include "backend/common/strided_layout.h"
#include "core/dtype_element.h"
#include "core/tensor.h"

namespace ltx::cuda {

// Element i of a buffer of dtype dt, as f32.
__device__ __forceinline__ float load_f32(const void* p, DType dt, int64_t i) {
  if (dt == DType::F32) return static_cast<const float*>(p)[i];
  if (dt == DType::BF16) return dtype_bits::bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
  return dtype_bits::load_as_f32(
      static_cast<const char*>(p) + i * dtype_bits::element_bytes(dt), dt);
}

// Stores v at element i of an f32 or bf16 buffer.
__device__ __forceinline__ void store_f32(void* p, DType dt, int64_t i, float v) {
  if (dt == DType::BF16) {
    static_cast<uint16_t*>(p)[i] = dtype_bits::f32_to_bf16(v);
  } else {
    static_cast<float*>(p)[i] = v;
  }
}

// The value of an ops::Summed operand from its two parts: ops::add's sum, rounded to bf16 when
// the sum's dtype is bf16 (as add stores it before the consumer reloads it).
__device__ __forceinline__ float summed_value(float a, float b, bool bf16) {
  const float s = dtype_bits::add_rn(a, b);
  return bf16 ? dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(s)) : s;
}

template <int K>
struct MapArgs {
  int nd = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[K + 1][kMaxDims] = {};  // [0]: the output, [k + 1]: input k
  const void* in[K] = {};
  DType in_dtype[K] = {};
  void* out = nullptr;
  DType out_dtype = DType::F32;
  // map_inner_vec_kernel's 32-bit path: the chunks per row and size[d] as fast divisors.
  FastDivU32 frow, fsize[kMaxDims];
};

// The element offsets of loop index i in the output (off[0]) and in each input (off[k + 1]).
template <int K>
__device__ __forceinline__ void strided_offsets(const MapArgs<K>& a, int64_t i, int64_t (&off)[K + 1]) {
  if (a.nd == 1) {
#pragma unroll
    for (int k = 0; k <= K; ++k) off[k] = i * a.stride[k][0];
    return;
  }
#pragma unroll
  for (int k = 0; k <= K; ++k) off[k] = 0;
  int64_t rem = i;
  for (int d = a.nd - 1; d >= 0; --d) {
    const int64_t idx = rem % a.size[d];
    rem /= a.size[d];
#pragma unroll
    for (int k = 0; k <= K; ++k) off[k] += idx * a.stride[k][d];
  }
}

// Element i of an operand as the loop's value type V: f32 from any storage dtype (load_f32), or
// f64 as stored (the float64 loop, whose operands are all f64); and the store back.
template <typename V>
__device__ __forceinline__ V load_value(const void* p, [[maybe_unused]] DType dt, int64_t i) {
  if constexpr (std::is_same_v<V, double>) {
    return static_cast<const double*>(p)[i];
  } else {
    return load_f32(p, dt, i);
  }
}
template <typename V>
__device__ __forceinline__ void store_value(void* p, [[maybe_unused]] DType dt, int64_t i, V v) {
  if constexpr (std::is_same_v<V, double>) {
    static_cast<double*>(p)[i] = v;
  } else {
    store_f32(p, dt, i, v);
  }
}

// The general strided loop; V = double is the float64 loop (map_into_f64).
template <int K, typename F, typename V = float>
__global__ void map_kernel(MapArgs<K> a, int64_t n, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[K + 1];
    strided_offsets(a, i, off);
    V v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = load_value<V>(a.in[k], a.in_dtype[k], off[k + 1]);
    store_value<V>(a.out, a.out_dtype, off[0], f(v));
  }
}

inline constexpr int kVec = 8;

// ---- kVec values as bf16, 16 bytes at a time ----

// A packed pair of bf16 values with each NaN replaced by f32_to_bf16's canonical one (0x7FC0).
__device__ __forceinline__ uint32_t canonical_nan_bf16x2(uint32_t w) {
  uint32_t lo = w & 0xffffu, hi = w >> 16;
  if ((lo & 0x7fffu) > 0x7f80u) lo = 0x7fc0u;
  if ((hi & 0x7fffu) > 0x7f80u) hi = 0x7fc0u;
  return lo | (hi << 16);
}

// f32_to_bf16 of v[0 .. 7], packed in pairs (element 2j in the low half of word j). On sm_80+ as
// four paired conversions (cvt.rn.bf16x2.f32: the scalar cvt's round-to-nearest-even, two values
// per instruction); NaN, which f32_to_bf16 maps to one canonical value while the paired
// conversion may keep a payload, is tested once for the eight, and only a chunk holding one
// rewrites its NaN halves (from the packed words: the f32 values are dead after the conversions,
// which keeps register pressure as with per-value conversions). Bit for bit f32_to_bf16's; ~1.5
// instructions a value instead of ~4 (test, select, convert, pack), which the row norms were
// issue-bound on.
__device__ __forceinline__ uint4 pack_bf16x8(const float* v) {
  uint32_t w[4];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  bool nan = false;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[j]) : "f"(v[2 * j + 1]), "f"(v[2 * j]));
    nan |= (v[2 * j] != v[2 * j]) | (v[2 * j + 1] != v[2 * j + 1]);
  }
  if (nan) {
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] = canonical_nan_bf16x2(w[j]);
  }
#else
#pragma unroll
  for (int j = 0; j < 4; ++j)
    w[j] = static_cast<uint32_t>(dtype_bits::f32_to_bf16(v[2 * j])) |
           (static_cast<uint32_t>(dtype_bits::f32_to_bf16(v[2 * j + 1])) << 16);
#endif
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// The eight values of a pack_bf16x8 word set as f32 (little endian: element 2j is the low half).
// By value: bound to a load's result as a reference, the loaded vector was read as four 4-byte
// loads.
__device__ __forceinline__ void unpack_bf16x8(uint4 q, float* v) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = dtype_bits::f32_from_bits(w[j] << 16);
    v[2 * j + 1] = dtype_bits::f32_from_bits(w[j] & 0xffff0000u);
  }
}

// round_to(dt, v[j]) for the kVec values: what an op that stores dt leaves for the next one.
__device__ __forceinline__ void round_vec_to(DType dt, float* v) {
  if (dt == DType::BF16) unpack_bf16x8(pack_bf16x8(v), v);
}

// 16 bytes at element i of a bf16 buffer in global memory (16-byte aligned there), stored as one
// vector: in gated_add_rms_norm_modulate's kernel nvcc split the plain uint4 assignment into four
// 4-byte stores (four times the store requests).
__device__ __forceinline__ void store_global_bf16x8(void* p, int64_t i, const uint4& q) {
  uint16_t* dst = static_cast<uint16_t*>(p) + i;
#if defined(__CUDA_ARCH__)
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(q.x), "r"(q.y), "r"(q.z),
               "r"(q.w)
               : "memory");
#else
  *reinterpret_cast<uint4*>(dst) = q;
#endif
}

// Elements i .. i + 7 of an f32 or bf16 buffer (16-byte aligned there) as f32.
__device__ __forceinline__ void load_vec(const void* p, DType dt, int64_t i, float* v) {
  if (dt == DType::BF16) {
    unpack_bf16x8(*reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p) + i), v);
  } else {
    const float4* q = reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
    const float4 a = q[0], b = q[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}

// Stores v[0 .. 7] at elements i .. i + 7 of an f32 or bf16 buffer (16-byte aligned there).
__device__ __forceinline__ void store_vec(void* p, DType dt, int64_t i, const float* v) {
  if (dt == DType::BF16) {
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p) + i) = pack_bf16x8(v);
  } else {
    float4* q = reinterpret_cast<float4*>(static_cast<float*>(p) + i);
    q[0] = make_float4(v[0], v[1], v[2], v[3]);
    q[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

// store_vec into global memory, a bf16 vector through store_global_bf16x8.
__device__ __forceinline__ void store_vec_global(void* p, DType dt, int64_t i, const float* v) {
  if (dt == DType::BF16) {
    store_global_bf16x8(p, i, pack_bf16x8(v));
  } else {
    store_vec(p, dt, i, v);
  }
}

// r[j] = f(v[0][j], ..., v[K-1][j]) for the kVec elements of a vector.
template <int K, typename F>
__device__ __forceinline__ void apply_vec(const float (&v)[K][kVec], const F& f, float (&r)[kVec]) {
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    float e[K];
#pragma unroll
    for (int k = 0; k < K; ++k) e[k] = v[k][j];
    r[j] = f(e);
  }
}

// The dense fast path (see the file comment): a.nd == 1, output stride 1, input strides 1 or 0.
template <int K, typename F>
__global__ void map_dense_kernel(MapArgs<K> a, int64_t n, F f) {
  const int64_t chunks = n / kVec;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = tid; c < chunks; c += step) {
    const int64_t i0 = c * kVec;
    float v[K][kVec];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (a.stride[k + 1][0] == 0) {
        const float s = load_f32(a.in[k], a.in_dtype[k], 0);
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[k][j] = s;
      } else {
        load_vec(a.in[k], a.in_dtype[k], i0, v[k]);
      }
    }
    float r[kVec];
    apply_vec<K>(v, f, r);
    store_vec(a.out, a.out_dtype, i0, r);
  }
  const int64_t i = chunks * kVec + tid;  // the scalar tail (< kVec elements)
  if (i < n) {
    float e[K];
#pragma unroll
    for (int k = 0; k < K; ++k) e[k] = load_f32(a.in[k], a.in_dtype[k], i * a.stride[k + 1][0]);
    store_f32(a.out, a.out_dtype, i, f(e));
  }
}

// The broadcast fast path: the innermost coalesced dim has unit stride in the output and a
// multiple of kVec elements; every input's innermost stride is 1 (read as 16-byte vectors) or 0
// (one value per chunk, e.g. a per-row gate). The outer dims may broadcast any way (the AdaLN
// table + per-token values, [B, T, D] x [B, 1, D] gates). Each thread handles kVec consecutive
// elements of one row; the outer offsets are computed once per chunk. Index: the type of the
// chunk index divisions (32-bit ones are several times cheaper than 64-bit ones, which made this
// loop instruction bound); the outermost dim needs no division.
template <int K, typename F, typename Index>
__global__ void map_inner_vec_kernel(MapArgs<K> a, int64_t chunks, F f) {
  const int last = a.nd - 1;
  const Index row_chunks = static_cast<Index>(a.size[last] / kVec);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += step) {
    const Index ci = static_cast<Index>(c);
    Index col_chunk;
    Index rem = divmod_index<Index>(ci, row_chunks, a.frow, &col_chunk);
    const int64_t col = static_cast<int64_t>(col_chunk) * kVec;
    int64_t off[K + 1];
#pragma unroll
    for (int k = 0; k <= K; ++k) off[k] = col * a.stride[k][last];
    for (int d = last - 1; d >= 0; --d) {
      Index idx = rem;
      if (d > 0) rem = divmod_index<Index>(rem, a.size[d], a.fsize[d], &idx);
#pragma unroll
      for (int k = 0; k <= K; ++k) off[k] += static_cast<int64_t>(idx) * a.stride[k][d];
    }
    float v[K][kVec];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (a.stride[k + 1][last] == 0) {
        const float s = load_f32(a.in[k], a.in_dtype[k], off[k + 1]);
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[k][j] = s;
      } else {
        load_vec(a.in[k], a.in_dtype[k], off[k + 1], v[k]);
      }
    }
    float r[kVec];
    apply_vec<K>(v, f, r);
    store_vec(a.out, a.out_dtype, off[0], r);
  }
}

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Storage dtypes the 16-byte vector loads/stores take (load_vec / store_vec).
inline bool vec_dtype(DType dt) { return dt == DType::F32 || dt == DType::BF16; }

// Whether the coalesced args can take map_inner_vec_kernel (see there).
template <int K>
bool inner_vec_ok(const MapArgs<K>& a) {
  const int last = a.nd - 1;
  if (a.nd < 2 || a.size[last] % kVec != 0) return false;
  // Every vector start must be 16-byte aligned: unit inner stride, outer strides multiples of kVec.
  const auto vec_operand = [&](int k, const void* p, DType dt) {
    if (a.stride[k][last] != 1 || !vec_dtype(dt) || !aligned16(p)) return false;
    for (int d = 0; d < last; ++d)
      if (a.stride[k][d] % kVec != 0) return false;
    return true;
  };
  if (!vec_operand(0, a.out, a.out_dtype)) return false;
  for (int k = 0; k < K; ++k)
    if (a.stride[k + 1][last] != 0 && !vec_operand(k + 1, a.in[k], a.in_dtype[k])) return false;
  return true;
}

// Whether the coalesced args can take map_dense_kernel.
template <int K>
bool dense_ok(const MapArgs<K>& a) {
  if (a.nd != 1 || a.stride[0][0] != 1 || !vec_dtype(a.out_dtype) || !aligned16(a.out)) return false;
  for (int k = 0; k < K; ++k) {
    const int64_t st = a.stride[k + 1][0];
    if (st == 0) continue;
    if (st != 1 || !vec_dtype(a.in_dtype[k]) || !aligned16(a.in[k])) return false;
  }
  return true;
}

// The coalesced loop of out[i] = f(ins[0][i], ...) with the inputs broadcast to out's shape.
template <int K>
MapArgs<K> map_args(const Tensor& out, const std::array<const Tensor*, K>& ins) {
  const Shape& shape = out.shape();
  std::array<Strides, K + 1> strides;
  strides[0] = out.strides();
  for (int k = 0; k < K; ++k) strides[k + 1] = broadcast_strides(*ins[k], shape);
  const StridedLoop<K + 1> L = coalesce<K + 1>(shape, strides);
  MapArgs<K> a;
  a.nd = L.ndim;
  for (int d = 0; d < L.ndim; ++d) {
    a.size[d] = L.size[d];
    for (int k = 0; k <= K; ++k) a.stride[k][d] = L.stride[k][d];
  }
  for (int k = 0; k < K; ++k) {
    a.in[k] = ins[k]->raw_data();
    a.in_dtype[k] = ins[k]->dtype();
  }
  a.out = out.raw_data();
  a.out_dtype = out.dtype();
  return a;
}

// See the file comment. `out` must be f32 or bf16 and on the inputs' CUDA device; F is a functor
// with `__device__ float operator()(const float* v) const`.
template <int K, typename F>
void map_into(const Tensor& out, const std::array<const Tensor*, K>& ins, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  MapArgs<K> a = map_args<K>(out, ins);
  const int dev = out.device().index;
  DeviceGuard guard(dev);
  constexpr int kThreads = 256;
  const cudaStream_t s = current_stream(dev).handle();
  if (dense_ok(a)) {
    const int64_t chunks = n / kVec;
    map_dense_kernel<K, F><<<grid_for(chunks > 0 ? chunks : 1, kThreads, dev), kThreads, 0, s>>>(a, n, f);
  } else if (inner_vec_ok(a)) {
    const int64_t chunks = n / kVec;
    if (fast_div_fits(chunks)) {
      a.frow = FastDivU32(static_cast<uint32_t>(a.size[a.nd - 1] / kVec));
      for (int d = 0; d + 1 < a.nd; ++d) a.fsize[d] = FastDivU32(static_cast<uint32_t>(a.size[d]));
      map_inner_vec_kernel<K, F, uint32_t><<<grid_for(chunks, kThreads, dev), kThreads, 0, s>>>(a, chunks, f);
    } else {
      map_inner_vec_kernel<K, F, int64_t><<<grid_for(chunks, kThreads, dev), kThreads, 0, s>>>(a, chunks, f);
    }
  } else {
    map_kernel<K, F><<<grid_for(n, kThreads, dev), kThreads, 0, s>>>(a, n, f);
  }
  LTX_CUDA_CHECK_LAUNCH();
}

// The float64 loop (ops::binary with an f64 operand): every operand and the output are f64, any
// strides, broadcast; F has `__device__ double operator()(const double* v) const`. Only the general
// strided kernel: these tensors are latents (a few MB), computed a few times per denoising step.
template <int K, typename F>
void map_into_f64(const Tensor& out, const std::array<const Tensor*, K>& ins, F f) {
  const int64_t n = out.numel();
  if (n == 0) return;
  LTX_CHECK(out.dtype() == DType::F64, "map_into_f64: the output is ", out.describe());
  for (int k = 0; k < K; ++k)
    LTX_CHECK(ins[k]->dtype() == DType::F64, "map_into_f64: input ", k, " is ", ins[k]->describe());
  const MapArgs<K> a = map_args<K>(out, ins);
  const int dev = out.device().index;
  DeviceGuard guard(dev);
  constexpr int kThreads = 256;
  map_kernel<K, F, double><<<grid_for(n, kThreads, dev), kThreads, 0, current_stream(dev).handle()>>>(a, n, f);
  LTX_CUDA_CHECK_LAUNCH();
}

}  // namespace ltx::cuda
