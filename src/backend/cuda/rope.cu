#include "backend/cuda/rope.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backend/cuda/attention.h"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/fast_div.cuh"
#include "backend/cuda/rms_row.cuh"

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

// The rotation of one pair, shared by both kernels: two products and one sum, each rounded on its
// own (no FMA), as on the CPU. Split: (x1, x2) = (x[p], x[p + D/2]) with one angle (c, s).
__device__ __forceinline__ void rotate_split(float x1, float x2, float c, float s, float* y1,
                                             float* y2) {
  *y1 = add_rn(mul_rn(x1, c), -mul_rn(x2, s));
  *y2 = add_rn(mul_rn(x2, c), mul_rn(x1, s));
}
// Interleaved: (x0, x1) = (x[2p], x[2p + 1]), each output with the table entries at its own index.
__device__ __forceinline__ void rotate_interleaved(float x0, float x1, float c0, float c1,
                                                   float s0, float s1, float* y0, float* y1) {
  *y0 = add_rn(mul_rn(x0, c0), -mul_rn(x1, s0));
  *y1 = add_rn(mul_rn(x1, c1), mul_rn(x0, s1));
}

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
      float y1, y2;
      rotate_split(x1, x2, c, s, &y1, &y2);
      store_f32(a.y, a.x_dtype, yo + p, y1);
      store_f32(a.y, a.x_dtype, yo + p + half, y2);
    } else {
      const int64_t i = 2 * p;
      const float x0 = load_f32(a.x, a.x_dtype, ox + i * a.xs);
      const float x1 = load_f32(a.x, a.x_dtype, ox + (i + 1) * a.xs);
      const float c0 = load_f32(a.c, a.c_dtype, oc + i * a.cs);
      const float c1 = load_f32(a.c, a.c_dtype, oc + (i + 1) * a.cs);
      const float s0 = load_f32(a.s, a.s_dtype, os + i * a.ss);
      const float s1 = load_f32(a.s, a.s_dtype, os + (i + 1) * a.ss);
      float y0, y1;
      rotate_interleaved(x0, x1, c0, c1, s0, s1, &y0, &y1);
      store_f32(a.y, a.x_dtype, yo + i, y0);
      store_f32(a.y, a.x_dtype, yo + i + 1, y1);
    }
  }
}

// The vector path (rope_vec_ok): one thread per chunk of kVec consecutive table entries of a row
// (Split: kVec pairs, x read at p and p + D/2; Interleaved: kVec / 2 pairs), every operand read
// and the output written as 16-byte vectors. Row indices are 32-bit (rope_vec_ok checks the
// sizes), the leading dims unrolled over kMaxDims (static argument indexing). Same per-pair math
// as rope_kernel: bit-identical results.
template <bool kSplit>
__global__ void __launch_bounds__(256) rope_vec_kernel(RopeArgs a, uint32_t chunks,
                                                      uint32_t row_chunks) {
  const uint32_t step = gridDim.x * blockDim.x;
  const int x_bytes = a.x_dtype == DType::BF16 ? 2 : 4;
  for (uint32_t t = blockIdx.x * blockDim.x + threadIdx.x; t < chunks; t += step) {
    const uint32_t row = t / row_chunks;
    const int64_t j = static_cast<int64_t>(t - row * row_chunks) * kVec;
    int64_t ox = 0, oc = 0, os = 0;
    uint32_t rem = row;
#pragma unroll
    for (int k = kMaxDims - 1; k >= 0; --k) {
      if (k < a.nd) {
        const uint32_t size = static_cast<uint32_t>(a.size[k]);
        const int64_t i = rem % size;
        rem /= size;
        ox += i * a.xst[k];
        oc += i * a.cst[k];
        os += i * a.sst[k];
      }
    }
    // Stores through pointers to the row (and its upper half) with a chunk index: with an index
    // that is not visibly a multiple of kVec nvcc splits the vector stores into 4-byte ones.
    char* y_row = static_cast<char*>(a.y) + static_cast<int64_t>(row) * a.d * x_bytes;
    float c[kVec], s[kVec];
    load_vec(a.c, a.c_dtype, oc + j, c);
    load_vec(a.s, a.s_dtype, os + j, s);
    if constexpr (kSplit) {
      const int64_t half = a.d / 2;
      float x1[kVec], x2[kVec], y1[kVec], y2[kVec];
      load_vec(a.x, a.x_dtype, ox + j, x1);
      load_vec(a.x, a.x_dtype, ox + half + j, x2);
#pragma unroll
      for (int e = 0; e < kVec; ++e) rotate_split(x1[e], x2[e], c[e], s[e], &y1[e], &y2[e]);
      store_vec(y_row, a.x_dtype, j, y1);
      store_vec(y_row + half * x_bytes, a.x_dtype, j, y2);
    } else {
      float x[kVec], y[kVec];
      load_vec(a.x, a.x_dtype, ox + j, x);
#pragma unroll
      for (int e = 0; e < kVec; e += 2)
        rotate_interleaved(x[e], x[e + 1], c[e], c[e + 1], s[e], s[e + 1], &y[e], &y[e + 1]);
      store_vec(y_row, a.x_dtype, j, y);
    }
  }
}

RopeArgs rope_args(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout,
                   const Tensor& out) {
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
  return a;
}

// Whether rope_vec_kernel can run `a` (x numel elements): the table width a multiple of kVec,
// every operand f32 or bf16 with unit last-dim stride, leading strides multiples of kVec and
// 16-byte aligned data (so every vector is aligned), and 32-bit row indices.
bool rope_vec_ok(const RopeArgs& a, int64_t numel) {
  const int64_t width = a.split ? a.d / 2 : a.d;
  if (numel == 0 || width % kVec != 0 || numel / kVec > int64_t{INT32_MAX}) return false;
  if (!vec_dtype(a.x_dtype) || !aligned16(a.y)) return false;
  const auto operand_ok = [&](const void* p, DType dt, int64_t last, const int64_t* lead) {
    if (last != 1 || !vec_dtype(dt) || !aligned16(p)) return false;
    for (int k = 0; k < a.nd; ++k)
      if (lead[k] % kVec != 0) return false;
    return true;
  };
  return operand_ok(a.x, a.x_dtype, a.xs, a.xst) && operand_ok(a.c, a.c_dtype, a.cs, a.cst) &&
         operand_ok(a.s, a.s_dtype, a.ss, a.sst);
}

// ---- rms_norm_rope ----

struct NormRopeArgs {
  const void* x = nullptr;
  void* y = nullptr;
  DType dtype = DType::F32;  // of x and y
  const void* w = nullptr;   // null: no weight
  DType w_dtype = DType::F32;
  const void* cos = nullptr;
  const void* sin = nullptr;
  DType c_dtype = DType::F32, s_dtype = DType::F32;
  // The tables' strides over (b, t) Interleaved or (b, head, t) Split; the last dim is dense.
  int64_t cst[3] = {}, sst[3] = {};
  int d = 0, heads = 0, dh = 0;
  int64_t tokens = 0, rows = 0;
  double eps = 0.0;
  bool prefetch = false;  // bf16 tables only (see rms_norm_rope_kernel)
  bool fast = false;      // rows below 2^31: a row's sample through ftokens (32-bit division)
  FastDivU32 ftokens;
  // The pair kernel's second tensor (k beside q: same shape, dtype and tables).
  const void* x2 = nullptr;
  void* y2 = nullptr;
  const void* w2 = nullptr;
  DType w2_dtype = DType::F32;
};

// Chunk c of a split-layout row: kVec pairs (j, j + dh / 2) of head h; split_offset: where its
// cos / sin values start in a table of strides st (sample b, token t).
struct SplitChunk {
  int h, j;
};
__device__ __forceinline__ SplitChunk split_chunk(int c, int head_chunks) {
  const int h = c / head_chunks;
  return {h, (c - h * head_chunks) * kVec};
}
__device__ __forceinline__ int64_t split_offset(const int64_t (&st)[3], int64_t b, int64_t t,
                                                SplitChunk k) {
  return b * st[0] + k.h * st[1] + t * st[2] + k.j;
}

// x's (and y's) dtype and the tables': bf16 where the kernel is instantiated for bf16 rows and
// tables (kBf16), so that the dtype checks fold away at compile time (fewer registers: the
// 4-block kernels spilled with both dtype paths live); else read from the arguments.
template <bool kBf16>
__device__ __forceinline__ DType rope_x_dtype(const NormRopeArgs& a) {
  return kBf16 ? DType::BF16 : a.dtype;
}

// The values the kernel reads of row set kSecond (false: x, w, y; true: the pair's x2, w2, y2),
// straight from the kernel parameters (no registers held for them).
template <bool kSecond>
__device__ __forceinline__ const void* norm_rope_weight(const NormRopeArgs& a) {
  return kSecond ? a.w2 : a.w;
}
template <bool kSecond>
__device__ __forceinline__ void* norm_rope_out(const NormRopeArgs& a) {
  return kSecond ? a.y2 : a.y;
}

// Elements i .. i + kVec - 1 of the staged row (1 / RMS rs) as rms_norm stores them: (x * rs) * w,
// rounded to x's dtype.
template <bool kSecond, bool kBf16>
__device__ __forceinline__ void norm_rope_load(const NormRopeArgs& a, const uint4* row, float rs, int i,
                                               float (&v)[kVec]) {
  const DType dtype = rope_x_dtype<kBf16>(a);
  load_vec(row, dtype, i, v);
  const void* wp = norm_rope_weight<kSecond>(a);
  float w[kVec];
  if (wp != nullptr) load_vec(wp, kSecond ? a.w2_dtype : a.w_dtype, i, w);
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    v[j] = mul_rn(v[j], rs);
    if (wp != nullptr) v[j] = mul_rn(v[j], w[j]);
  }
  round_vec_to(dtype, v);
}

// Split layout: rotates chunk (h, j) of a staged row with its kVec angles and stores both halves
// into the head-major output [B, heads, T, Dh].
template <bool kSecond, bool kBf16>
__device__ __forceinline__ void norm_rope_split_chunk(const NormRopeArgs& a, const uint4* row, float rs,
                                                      SplitChunk k, int64_t b, int64_t t,
                                                      const float (&cs)[kVec], const float (&sn)[kVec]) {
  const DType dtype = rope_x_dtype<kBf16>(a);
  const int half = a.dh / 2, x_bytes = dtype == DType::BF16 ? 2 : 4;
  float x1[kVec], x2[kVec], y1[kVec], y2[kVec];
  norm_rope_load<kSecond, kBf16>(a, row, rs, k.h * a.dh + k.j, x1);
  norm_rope_load<kSecond, kBf16>(a, row, rs, k.h * a.dh + half + k.j, x2);
#pragma unroll
  for (int e = 0; e < kVec; ++e) rotate_split(x1[e], x2[e], cs[e], sn[e], &y1[e], &y2[e]);
  // Stores through the head row's pointers with a chunk index (see rope_vec_kernel).
  char* y_row = static_cast<char*>(norm_rope_out<kSecond>(a)) +
                ((b * a.heads + k.h) * a.tokens + t) * a.dh * x_bytes;
  store_vec(y_row, dtype, k.j, y1);
  store_vec(y_row + half * x_bytes, dtype, k.j, y2);
}

// Interleaved layout: elements i .. i + kVec - 1 of row r, rotated and stored.
template <bool kSecond, bool kBf16>
__device__ __forceinline__ void norm_rope_interleaved_chunk(const NormRopeArgs& a, const uint4* row,
                                                            float rs, int64_t r, int i,
                                                            const float (&cs)[kVec],
                                                            const float (&sn)[kVec]) {
  const DType dtype = rope_x_dtype<kBf16>(a);
  const int x_bytes = dtype == DType::BF16 ? 2 : 4;
  float x[kVec], y[kVec];
  norm_rope_load<kSecond, kBf16>(a, row, rs, i, x);
#pragma unroll
  for (int e = 0; e < kVec; e += 2)
    rotate_interleaved(x[e], x[e + 1], cs[e], cs[e + 1], sn[e], sn[e + 1], &y[e], &y[e + 1]);
  store_vec(static_cast<char*>(norm_rope_out<kSecond>(a)) + r * a.d * x_bytes, dtype, i, y);
}

// One block of row_threads(d) threads per row (see rope.h); dynamic shared memory: one row.
// kPair (qk_rms_norm_rope): the block takes row r of x and of x2, both staged (two rows of shared
// memory), and rotates both with one load of the token's cos / sin. kBf16: x and both tables are
// bf16 (rope_x_dtype). kPrefetch (a resident grid, each block taking rows r, r + gridDim, ...):
// the rows alternate between two staging buffers, the next row's copy (copy_row_async) in flight
// while the block works on the current one.
template <bool kSplit, bool kPair, bool kBf16, bool kPrefetch = false>
__global__ void __launch_bounds__(kMaxRowThreads, kNormRopeMinBlocks) rms_norm_rope_kernel(NormRopeArgs a) {
  extern __shared__ uint4 norm_rope_row[];
  const DType dtype = rope_x_dtype<kBf16>(a);
  const DType c_dtype = kBf16 ? DType::BF16 : a.c_dtype, s_dtype = kBf16 ? DType::BF16 : a.s_dtype;
  const int x_bytes = dtype == DType::BF16 ? 2 : 4;
  const int row_vecs = a.d * x_bytes / 16;
  // kPrefetch: the second buffer (x's row, then x2's) after the first.
  uint4* const other = norm_rope_row + (kPair ? 2 : 1) * row_vecs;
  const auto stage = [&](int64_t r, uint4* dst) {  // row r of x (and x2) into dst, one group
    const int64_t off = r * a.d * x_bytes;
    copy_row_async(static_cast<const char*>(a.x) + off, dtype, a.d, dst);
    if constexpr (kPair) copy_row_async(static_cast<const char*>(a.x2) + off, dtype, a.d, dst + row_vecs);
    mma::cp_async_commit();
  };
  if (kPrefetch && blockIdx.x < a.rows) stage(blockIdx.x, norm_rope_row);
  bool odd = false;  // kPrefetch: the row is staged in `other`
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x, odd = !odd) {
    uint4* const row1 = kPrefetch && odd ? other : norm_rope_row;
    uint4* const row2 = row1 + row_vecs;  // kPair: x2's row
    const int64_t b = a.fast ? static_cast<int64_t>(a.ftokens.div(static_cast<uint32_t>(r))) : r / a.tokens;
    const int64_t t = r - b * a.tokens;
    // a.prefetch: the thread's first chunk of bf16 cos / sin (split layout) loaded before the
    // row's statistics, so their latency overlaps the staging loads (bench/RESULTS.md,
    // 2026-12-02: 0.068 against 0.066 ms at 6144 x 4096, 0.051 against 0.046 at 2048 wide).
    uint4 cs0 = {}, sn0 = {};
    const int half = a.dh / 2, head_chunks = half / kVec;
    const bool pre = kSplit && a.prefetch && static_cast<int>(threadIdx.x) < a.heads * head_chunks;
    if (pre) {
      const SplitChunk k = split_chunk(threadIdx.x, head_chunks);
      cs0 = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.cos) + split_offset(a.cst, b, t, k));
      sn0 = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.sin) + split_offset(a.sst, b, t, k));
    }
    float rs = 0.f, rs2 = 0.f;
    if constexpr (kPrefetch) {
      stage_next_then_wait(r + gridDim.x < a.rows,
                           [&] { stage(r + gridDim.x, odd ? norm_rope_row : other); });
      rs = staged_row_inv_rms(dtype, a.d, a.eps, row1);
      if constexpr (kPair) rs2 = staged_row_inv_rms(dtype, a.d, a.eps, row2);
    } else {
      const int64_t row_offset = r * a.d * x_bytes;
      rs = stage_row_inv_rms(static_cast<const char*>(a.x) + row_offset, dtype, a.d, a.eps, row1);
      if constexpr (kPair)
        rs2 = stage_row_inv_rms(static_cast<const char*>(a.x2) + row_offset, dtype, a.d, a.eps, row2);
    }
    if constexpr (kSplit) {
      for (int c = threadIdx.x; c < a.heads * head_chunks; c += blockDim.x) {
        const SplitChunk k = split_chunk(c, head_chunks);
        float cs[kVec], sn[kVec];
        if (pre && c == static_cast<int>(threadIdx.x)) {
          load_vec(&cs0, DType::BF16, 0, cs);
          load_vec(&sn0, DType::BF16, 0, sn);
        } else {
          load_vec(a.cos, c_dtype, split_offset(a.cst, b, t, k), cs);
          load_vec(a.sin, s_dtype, split_offset(a.sst, b, t, k), sn);
        }
        norm_rope_split_chunk<false, kBf16>(a, row1, rs, k, b, t, cs, sn);
        if constexpr (kPair) norm_rope_split_chunk<true, kBf16>(a, row2, rs2, k, b, t, cs, sn);
      }
    } else {
      for (int c = threadIdx.x; c < a.d / kVec; c += blockDim.x) {
        const int i = c * kVec;
        float cs[kVec], sn[kVec];
        load_vec(a.cos, c_dtype, b * a.cst[0] + t * a.cst[1] + i, cs);
        load_vec(a.sin, s_dtype, b * a.sst[0] + t * a.sst[1] + i, sn);
        norm_rope_interleaved_chunk<false, kBf16>(a, row1, rs, r, i, cs, sn);
        if constexpr (kPair) norm_rope_interleaved_chunk<true, kBf16>(a, row2, rs2, r, i, cs, sn);
      }
    }
    __syncthreads();  // the block is done with the staged rows before the next ones overwrite them
  }
}

// ---- qk_norm_rope_3d ----

struct QkRopeArgs {
  static constexpr int kLead = 5;  // [B, T, H, W, heads]
  const void* x[2] = {};           // q, k
  void* y[2] = {};
  const void* w[2] = {};  // null: no weight
  DType w_dtype[2] = {DType::F32, DType::F32};
  DType dtype = DType::F32;  // of q, k and the results
  int64_t size[kLead] = {};
  int64_t xst[2][kLead + 1] = {};
  int64_t yst[2][kLead] = {};  // output row strides (the head dim is dense)
  const void* cos[3] = {};
  const void* sin[3] = {};
  DType c_dtype[3] = {}, s_dtype[3] = {};
  int64_t cst[3][2] = {}, sst[3][2] = {};
  int start[4] = {};  // first element of each axis' chunk; start[3] = d
  int d = 0;
  int norm_threads = 0;  // rms_norm's block size for rows of d
  int64_t rows = 0;      // per tensor
  float q_scale = 1.f;
  double eps = 0.0;
  FastDivU32 fdiv[kLead];  // size[k] as fast divisors (the 32-bit index path)
};

// Stores the pair (v0, v1) at elements e, e + 1 (e even) of a contiguous f32 / bf16 buffer.
__device__ __forceinline__ void store_pair(void* p, DType dt, int64_t e, float v0, float v1) {
  if (dt == DType::BF16) {
    *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(p) + e) =
        static_cast<uint32_t>(dtype_bits::f32_to_bf16(v0)) |
        (static_cast<uint32_t>(dtype_bits::f32_to_bf16(v1)) << 16);
  } else {
    *reinterpret_cast<float2*>(static_cast<float*>(p) + e) = make_float2(v0, v1);
  }
}

// Where row g (q rows first, then k rows) of the launch lives (inactive past the last row). Index:
// the type of the row index divisions (32-bit ones are several times cheaper).
struct QkRopeRow {
  bool active = false, is_q = false;
  int64_t off = 0, yoff = 0;  // element offsets of the row's first value in x and in y
  int pos[3] = {};           // t, h, w
};

template <typename Index>
__device__ __forceinline__ QkRopeRow qk_rope_row(const QkRopeArgs& a, int64_t g) {
  QkRopeRow r;
  r.active = g < 2 * a.rows;
  r.is_q = g < a.rows;
  Index rem = static_cast<Index>(r.active ? (r.is_q ? g : g - a.rows) : 0);
#pragma unroll
  for (int k = QkRopeArgs::kLead - 1; k >= 0; --k) {
    Index i;
    rem = divmod_index<Index>(rem, a.size[k], a.fdiv[k], &i);
    r.off += static_cast<int64_t>(i) * (r.is_q ? a.xst[0][k] : a.xst[1][k]);
    r.yoff += static_cast<int64_t>(i) * (r.is_q ? a.yst[0][k] : a.yst[1][k]);
    if (k >= 1 && k <= 3) r.pos[k - 1] = static_cast<int>(i);
  }
  return r;
}

// One warp per row; rows [0, rows) of q, then [rows, 2 rows) of k (Index as for qk_rope_row).
// Dynamic shared memory: d floats per warp.
template <typename Index>
__global__ void __launch_bounds__(256) qk_norm_rope_kernel(QkRopeArgs a) {
  extern __shared__ float qk_rows[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float* buf = qk_rows + warp * a.d;
  const int64_t total = 2 * a.rows;
  const int64_t step = static_cast<int64_t>(gridDim.x) * warps;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * warps + warp; g < total; g += step) {
    const QkRopeRow row = qk_rope_row<Index>(a, g);
    const bool is_q = row.is_q;
    const int64_t off = row.off, yoff = row.yoff;
    const void* x = is_q ? a.x[0] : a.x[1];
    const int64_t xs = is_q ? a.xst[0][QkRopeArgs::kLead] : a.xst[1][QkRopeArgs::kLead];
    for (int i = lane; i < a.d; i += 32) buf[i] = load_f32(x, a.dtype, off + i * xs);
    __syncwarp();
    // rms_norm: the row scale from its block's sum, then per element (x * rs) * w, stored.
    const float rs =
        inv_std(warp_row_sum_sq([buf](int i) { return buf[i]; }, a.d, a.norm_threads), a.d, a.eps);
    const void* w = is_q ? a.w[0] : a.w[1];
    const DType w_dtype = is_q ? a.w_dtype[0] : a.w_dtype[1];
    void* y = is_q ? a.y[0] : a.y[1];
    for (int e = 2 * lane; e < a.d; e += 64) {
      float v[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float n = mul_rn(buf[e + j], rs);
        if (w != nullptr) n = mul_rn(n, load_f32(w, w_dtype, e + j));
        n = round_to(a.dtype, n);
        if (is_q) n = round_to(a.dtype, mul_rn(n, a.q_scale));  // ops::mul(q, scale)
        v[j] = n;
      }
      // apply_rope (Interleaved) with the table of the chunk's axis, at the row's index there.
      float c0 = 0.f, c1 = 0.f, s0 = 0.f, s1 = 0.f;
#pragma unroll
      for (int ax = 0; ax < 3; ++ax) {
        if (e >= a.start[ax] && e < a.start[ax + 1]) {
          const int64_t j = e - a.start[ax];
          const int64_t co = row.pos[ax] * a.cst[ax][0] + j * a.cst[ax][1];
          const int64_t so = row.pos[ax] * a.sst[ax][0] + j * a.sst[ax][1];
          c0 = load_f32(a.cos[ax], a.c_dtype[ax], co);
          c1 = load_f32(a.cos[ax], a.c_dtype[ax], co + a.cst[ax][1]);
          s0 = load_f32(a.sin[ax], a.s_dtype[ax], so);
          s1 = load_f32(a.sin[ax], a.s_dtype[ax], so + a.sst[ax][1]);
        }
      }
      float y0, y1;
      rotate_interleaved(v[0], v[1], c0, c1, s0, s1, &y0, &y1);
      store_pair(y, a.dtype, yoff + e, y0, y1);
    }
    __syncwarp();  // the warp is done with buf before the next row overwrites it
  }
}

// The head-dim-64 bf16 path of qk_norm_rope_3d (qk_norm_rope_d64_path): 8 lanes per row, 4 rows
// per warp; lane tl of a row holds its elements 8 tl .. 8 tl + 7 (one 16-byte load and store, and
// the interleaved RoPE pairs are inside the lane).
// rms_norm's block for D = 64 is two full warps, one element per thread: its sum of squares is
// warp_sum over elements 0-31 (a butterfly pairing in-half index bits 4, 3, 2, 1, 0 in that order)
// plus the same over 32-63. Here the in-half index is 8 q + k (q = tl % 4 across lanes, k in
// registers): warp_sum_of_4x8 (rms_row.cuh) per half, and one more shuffle for the halves. The
// same row scale, bit for bit.
// Tables: with kVecTables, each lane's 8 elements lie in one axis (the axis starts are multiples
// of 8) and the f32 tables are read as float4s; otherwise per element.
constexpr int kRope64Warps = 8;

template <bool kVecTables>
__device__ __forceinline__ void rope64_tables(const QkRopeArgs& a, const int (&pos)[3], int e0,
                                              float (&c)[8], float (&s)[8]) {
  if constexpr (kVecTables) {
    const int ax = e0 >= a.start[2] ? 2 : (e0 >= a.start[1] ? 1 : 0);
    const int p = ax == 0 ? pos[0] : (ax == 1 ? pos[1] : pos[2]);
    const int col = e0 - (ax == 0 ? a.start[0] : (ax == 1 ? a.start[1] : a.start[2]));
    const float* cp = static_cast<const float*>(a.cos[ax]) + p * static_cast<int>(a.cst[ax][0]) + col;
    const float* sp = static_cast<const float*>(a.sin[ax]) + p * static_cast<int>(a.sst[ax][0]) + col;
    const float4 c0 = *reinterpret_cast<const float4*>(cp), c1 = *reinterpret_cast<const float4*>(cp + 4);
    const float4 s0 = *reinterpret_cast<const float4*>(sp), s1 = *reinterpret_cast<const float4*>(sp + 4);
    c[0] = c0.x; c[1] = c0.y; c[2] = c0.z; c[3] = c0.w; c[4] = c1.x; c[5] = c1.y; c[6] = c1.z; c[7] = c1.w;
    s[0] = s0.x; s[1] = s0.y; s[2] = s0.z; s[3] = s0.w; s[4] = s1.x; s[5] = s1.y; s[6] = s1.z; s[7] = s1.w;
  } else {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int e = e0 + k, pair = e & ~1;
      const int ax = pair >= a.start[2] ? 2 : (pair >= a.start[1] ? 1 : 0);
      const int col = e - a.start[ax];
      const int p = ax == 0 ? pos[0] : (ax == 1 ? pos[1] : pos[2]);
      c[k] = load_f32(a.cos[ax], a.c_dtype[ax],
                      p * static_cast<int>(a.cst[ax][0]) + col * static_cast<int>(a.cst[ax][1]));
      s[k] = load_f32(a.sin[ax], a.s_dtype[ax],
                      p * static_cast<int>(a.sst[ax][0]) + col * static_cast<int>(a.sst[ax][1]));
    }
  }
}

// rms_norm's sum of squares of a 64-element row (see above): each half's warp_sum by its 4 lanes,
// then the two halves.
__device__ __forceinline__ float rope64_row_sum(const float (&sq)[8], int tl) {
  const float half = warp_sum_of_4x8(sq, tl & 3);
  return half + __shfl_xor_sync(0xffffffffu, half, 4);
}

// Lane elements e0 .. e0 + 7 of the q and k norm weights (1 where there is none).
__device__ __forceinline__ void rope64_weights(const QkRopeArgs& a, int e0, float (&wq)[8],
                                               float (&wk)[8]) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    wq[k] = a.w[0] != nullptr ? load_f32(a.w[0], a.w_dtype[0], e0 + k) : 1.f;
    wk[k] = a.w[1] != nullptr ? load_f32(a.w[1], a.w_dtype[1], e0 + k) : 1.f;
  }
}

// One q or k row of the head-dim-64 kernels, lane tl's 8 elements (`data`): rms_norm with the
// row's weights w (when has_w), the q scale for a q row, then the interleaved rotation by the
// lane's table values c / s; the bf16 pairs to store. The weights are picked into registers by
// value (wq or wk), not through a pointer, which would put the arrays in local memory.
__device__ __forceinline__ uint4 rope64_row(const QkRopeArgs& a, uint4 data, int tl, bool is_q,
                                           bool has_w, const float (&wq)[8], const float (&wk)[8],
                                           const float (&c)[8], const float (&s)[8]) {
  const uint32_t words[4] = {data.x, data.y, data.z, data.w};
  float v[8], sq[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    v[k] = dtype_bits::bf16_to_f32(static_cast<uint16_t>(words[k / 2] >> (16 * (k & 1))));
    sq[k] = add_square(0.f, v[k]);
  }
  const float rs = inv_std(rope64_row_sum(sq, tl), 64, a.eps);
  float n[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    float t = mul_rn(v[k], rs);
    if (has_w) t = mul_rn(t, is_q ? wq[k] : wk[k]);
    t = round_to(DType::BF16, t);
    if (is_q) t = round_to(DType::BF16, mul_rn(t, a.q_scale));
    n[k] = t;
  }
  uint32_t out[4];
#pragma unroll
  for (int k = 0; k < 8; k += 2) {
    float y0, y1;
    rotate_interleaved(n[k], n[k + 1], c[k], c[k + 1], s[k], s[k + 1], &y0, &y1);
    out[k / 2] = static_cast<uint32_t>(dtype_bits::f32_to_bf16(y0)) |
                 (static_cast<uint32_t>(dtype_bits::f32_to_bf16(y1)) << 16);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

template <typename Index, bool kVecTables>
__global__ void __launch_bounds__(kRope64Warps * 32) qk_rope64_kernel(QkRopeArgs a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = lane >> 3, tl = lane & 7, e0 = 8 * tl;
  float wq[8], wk[8];
  rope64_weights(a, e0, wq, wk);
  const int64_t groups = (2 * a.rows + 3) / 4;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kRope64Warps;
  int64_t grp = static_cast<int64_t>(blockIdx.x) * kRope64Warps + warp;
  // The next group's rows are loaded before this group is worked on (two rows in flight per lane).
  const auto fetch = [&](const QkRopeRow& r) {
    if (!r.active) return make_uint4(0, 0, 0, 0);
    const uint16_t* x = static_cast<const uint16_t*>(r.is_q ? a.x[0] : a.x[1]) + r.off;
    return *reinterpret_cast<const uint4*>(x + e0);
  };
  QkRopeRow cur = qk_rope_row<Index>(a, grp * 4 + sub);
  uint4 data = grp < groups ? fetch(cur) : make_uint4(0, 0, 0, 0);
  for (; grp < groups; grp += step) {
    const QkRopeRow nxt = qk_rope_row<Index>(a, (grp + step) * 4 + sub);
    const uint4 next_data = grp + step < groups ? fetch(nxt) : make_uint4(0, 0, 0, 0);
    float c[8], s[8];
    rope64_tables<kVecTables>(a, cur.pos, e0, c, s);
    const bool is_q = cur.is_q;
    const bool has_w = a.w[is_q ? 0 : 1] != nullptr;
    const uint4 out = rope64_row(a, data, tl, is_q, has_w, wq, wk, c, s);
    if (cur.active) {
      uint16_t* y = static_cast<uint16_t*>(cur.is_q ? a.y[0] : a.y[1]) + cur.yoff;
      *reinterpret_cast<uint4*>(y + e0) = out;
    }
    cur = nxt;
    data = next_data;
  }
}

// qk_rope64_kernel with a row's q and k together (q and k views of one fused projection: the
// same strides on both sides): a lane group's 8 lanes take q row i and k row i, so the row's
// coordinates, offsets and RoPE table values are found once for both. The kernel was bound by
// those per-row instructions. The same per-row math, bit for bit.
template <bool kVecTables>
__global__ void __launch_bounds__(kRope64Warps * 32) qk_rope64_pair_kernel(QkRopeArgs a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sub = lane >> 3, tl = lane & 7, e0 = 8 * tl;
  float wq[8], wk[8];
  rope64_weights(a, e0, wq, wk);
  const int64_t groups = (a.rows + 3) / 4;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kRope64Warps;
  int64_t grp = static_cast<int64_t>(blockIdx.x) * kRope64Warps + warp;
  // q row g's place (qk_rope_row of a q row); k's offsets are q's plus the base difference.
  const auto fetch = [&](const QkRopeRow& r, int side) {
    if (!r.active) return make_uint4(0, 0, 0, 0);
    return *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.x[side]) + r.off + e0);
  };
  QkRopeRow cur = qk_rope_row<uint32_t>(a, grp * 4 + sub);
  cur.active = cur.active && grp * 4 + sub < a.rows;
  uint4 dq = fetch(cur, 0), dk = fetch(cur, 1);
  for (; grp < groups; grp += step) {
    QkRopeRow nxt = qk_rope_row<uint32_t>(a, (grp + step) * 4 + sub);
    nxt.active = nxt.active && (grp + step) * 4 + sub < a.rows;
    const uint4 nq = fetch(nxt, 0), nk = fetch(nxt, 1);
    float c[8], s[8];
    rope64_tables<kVecTables>(a, cur.pos, e0, c, s);
#pragma unroll
    for (int side = 0; side < 2; ++side) {
      const uint4 out = rope64_row(a, side == 0 ? dq : dk, tl, side == 0, a.w[side] != nullptr,
                                   wq, wk, c, s);
      if (cur.active) {
        uint16_t* y = static_cast<uint16_t*>(a.y[side]) + cur.yoff;
        *reinterpret_cast<uint4*>(y + e0) = out;
      }
    }
    cur = nxt;
    dq = nq;
    dk = nk;
  }
}

// Whether q and k (and their outputs) step alike, for qk_rope64_pair_kernel.
bool qk_rope_pairs(const QkRopeArgs& a) {
  for (int i = 0; i <= QkRopeArgs::kLead; ++i)
    if (a.xst[0][i] != a.xst[1][i]) return false;
  for (int i = 0; i < QkRopeArgs::kLead; ++i)
    if (a.yst[0][i] != a.yst[1][i]) return false;
  return true;
}

// Whether the head-dim-64 kernel can read the tables as float4s: f32, unit column stride, 16-byte
// aligned rows, and axis starts on 8-element boundaries.
bool rope64_vec_tables(const QkRopeArgs& a) {
  if (a.start[1] % 8 != 0 || a.start[2] % 8 != 0) return false;
  for (int ax = 0; ax < 3; ++ax) {
    if (a.c_dtype[ax] != DType::F32 || a.s_dtype[ax] != DType::F32) return false;
    if (a.cst[ax][1] != 1 || a.sst[ax][1] != 1 || a.cst[ax][0] % 4 != 0 || a.sst[ax][0] % 4 != 0)
      return false;
    if (reinterpret_cast<uintptr_t>(a.cos[ax]) % 16 != 0 || reinterpret_cast<uintptr_t>(a.sin[ax]) % 16 != 0)
      return false;
  }
  return true;
}

template <typename Index>
void launch_rope64(const QkRopeArgs& a, unsigned grid, cudaStream_t stream) {
  if (std::is_same_v<Index, uint32_t> && qk_rope_pairs(a)) {
    // A warp per 4 q / k row pairs: half the groups, on the same grid-stride grid.
    if (rope64_vec_tables(a)) {
      qk_rope64_pair_kernel<true><<<grid, kRope64Warps * 32, 0, stream>>>(a);
    } else {
      qk_rope64_pair_kernel<false><<<grid, kRope64Warps * 32, 0, stream>>>(a);
    }
    return;
  }
  if (rope64_vec_tables(a)) {
    qk_rope64_kernel<Index, true><<<grid, kRope64Warps * 32, 0, stream>>>(a);
  } else {
    qk_rope64_kernel<Index, false><<<grid, kRope64Warps * 32, 0, stream>>>(a);
  }
}

}  // namespace

Tensor apply_rope(const Tensor& x, const Tensor& cos, const Tensor& sin, ops::RopeLayout layout) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const RopeArgs a = rope_args(x, cos, sin, layout, out);
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  constexpr int kThreads = 256;
  const cudaStream_t stream = current_stream(dev).handle();
  if (rope_vec_ok(a, x.numel())) {
    // Chunks of kVec table entries: Split rows have D / 2 entries, Interleaved rows D.
    const int64_t row_chunks = (a.split ? a.d / 2 : a.d) / kVec;
    const int64_t chunks = x.numel() / a.d * row_chunks;
    const unsigned grid = grid_for(chunks, kThreads, dev);
    if (a.split) {
      rope_vec_kernel<true><<<grid, kThreads, 0, stream>>>(a, static_cast<uint32_t>(chunks),
                                                           static_cast<uint32_t>(row_chunks));
    } else {
      rope_vec_kernel<false><<<grid, kThreads, 0, stream>>>(a, static_cast<uint32_t>(chunks),
                                                            static_cast<uint32_t>(row_chunks));
    }
  } else {
    const int64_t pairs = x.numel() / 2;
    rope_kernel<<<grid_for(pairs, kThreads, dev), kThreads, 0, stream>>>(a, pairs);
  }
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

bool rope_vectorised(const Tensor& x, const Tensor& cos, const Tensor& sin,
                     ops::RopeLayout layout) {
  // x stands in for the output: a fresh allocation, aligned whenever x is.
  return rope_vec_ok(rope_args(x, cos, sin, layout, x), x.numel());
}

bool rms_norm_rope_fusable(const Tensor& x, const Tensor& weight, const Tensor& cos,
                           const Tensor& sin, ops::RopeLayout layout, int64_t heads) {
  const bool split = layout == ops::RopeLayout::Split;
  const int64_t d = x.size(-1), dh = d / heads;
  if (x.numel() == 0 || !x.is_contiguous() || !vec_dtype(x.dtype()) || !aligned16(x.raw_data()) ||
      d % kVec != 0 || (split && dh % (2 * kVec) != 0) ||
      d * static_cast<int64_t>(dtype_size(x.dtype())) > kRowVecMaxBytes)
    return false;
  if (weight.defined() &&
      (!weight.is_contiguous() || !vec_dtype(weight.dtype()) || !aligned16(weight.raw_data())))
    return false;
  for (const Tensor* t : {&cos, &sin}) {
    if (!vec_dtype(t->dtype()) || !aligned16(t->raw_data()) || t->stride(-1) != 1) return false;
    for (int k = 0; k + 1 < t->dim(); ++k)
      if (t->stride(k) % kVec != 0) return false;
  }
  return true;
}

namespace {

// rms_norm_rope's output for x [B, T, D]: [B, heads, T, D / heads] (Split) or x's shape.
Tensor norm_rope_output(const Tensor& x, ops::RopeLayout layout, int64_t heads) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  return layout == ops::RopeLayout::Split ? Tensor::empty({b, heads, t, d / heads}, x.dtype(), x.device())
                                          : Tensor::empty(x.shape(), x.dtype(), x.device());
}

// The arguments of one row set (x -> out with weight; the pair's second one is added by the caller).
NormRopeArgs norm_rope_args(const Tensor& x, const Tensor& wc, double eps, const Tensor& cos,
                            const Tensor& sin, int64_t heads, const Tensor& out) {
  const int64_t t = x.size(1), d = x.size(2);
  NormRopeArgs a;
  a.x = x.raw_data();
  a.y = out.raw_data();
  a.dtype = x.dtype();
  if (wc.defined()) {
    a.w = wc.raw_data();
    a.w_dtype = wc.dtype();
  }
  a.cos = cos.raw_data();
  a.sin = sin.raw_data();
  a.c_dtype = cos.dtype();
  a.s_dtype = sin.dtype();
  for (int k = 0; k + 1 < cos.dim(); ++k) {  // (b, t) or (b, head, t)
    a.cst[k] = cos.stride(k);
    a.sst[k] = sin.stride(k);
  }
  a.d = static_cast<int>(d);
  a.heads = static_cast<int>(heads);
  a.dh = static_cast<int>(d / heads);
  a.tokens = t;
  a.rows = x.size(0) * t;
  a.eps = eps;
  a.prefetch = a.c_dtype == DType::BF16 && a.s_dtype == DType::BF16;
  a.fast = fast_div_fits(a.rows) && t > 0 && t < (int64_t{1} << 31);
  if (a.fast) a.ftokens = FastDivU32(static_cast<uint32_t>(t));
  return a;
}

template <bool kPair>
void launch_norm_rope(const NormRopeArgs& a, bool split, int dev) {
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev).handle();
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(a.rows, int64_t{1} << 20));
  const size_t smem = (kPair ? 2 : 1) * static_cast<size_t>(a.d) * dtype_size(a.dtype);
  const bool bf16 =
      a.dtype == DType::BF16 && a.c_dtype == DType::BF16 && a.s_dtype == DType::BF16;
  const int threads = row_threads(a.d);
  const auto launch = [&](auto bf) {
    constexpr bool kBf = decltype(bf)::value;
    // bf16 rows (kPrefetch = kBf): a resident grid, each block staging its next row while it works
    // on the current one (two buffers).
    const auto go = [&](auto kernel) {
      const size_t bytes = kBf ? 2 * smem : smem;
      allow_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
      const unsigned grid = kBf ? resident_grid(kernel, threads, bytes, a.rows, dev) : blocks;
      kernel<<<grid, threads, bytes, stream>>>(a);
    };
    if (split) {
      go(rms_norm_rope_kernel<true, kPair, kBf, kBf>);
    } else {
      go(rms_norm_rope_kernel<false, kPair, kBf, kBf>);
    }
  };
  if (bf16) {
    launch(std::true_type{});
  } else {
    launch(std::false_type{});
  }
  LTX_CUDA_CHECK_LAUNCH();
}

}  // namespace

Tensor rms_norm_rope(const Tensor& x, const Tensor& weight, double eps, const Tensor& cos,
                     const Tensor& sin, ops::RopeLayout layout, int64_t heads) {
  Tensor out = norm_rope_output(x, layout, heads);
  if (out.numel() == 0) return out;
  const Tensor wc = weight.defined() ? weight.contiguous() : Tensor();
  launch_norm_rope<false>(norm_rope_args(x, wc, eps, cos, sin, heads, out),
                          layout == ops::RopeLayout::Split, x.device().index);
  return out;
}

bool qk_rms_norm_rope_fusable(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                              const Tensor& k_weight, const Tensor& cos, const Tensor& sin,
                              ops::RopeLayout layout, int64_t heads) {
  // Two staged rows must fit the 48 KiB of shared memory a launch gets without opting in, beside
  // block_reduce's static buffer.
  constexpr int64_t kPairRowsMaxBytes = 40 * 1024;
  return q.shape() == k.shape() && q.dtype() == k.dtype() &&
         2 * q.size(-1) * static_cast<int64_t>(dtype_size(q.dtype())) <= kPairRowsMaxBytes &&
         rms_norm_rope_fusable(q, q_weight, cos, sin, layout, heads) &&
         rms_norm_rope_fusable(k, k_weight, cos, sin, layout, heads);
}

ops::QkRope qk_rms_norm_rope(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                             const Tensor& k_weight, double eps, const Tensor& cos, const Tensor& sin,
                             ops::RopeLayout layout, int64_t heads) {
  ops::QkRope r{norm_rope_output(q, layout, heads), norm_rope_output(k, layout, heads)};
  if (r.q.numel() == 0) return r;
  const Tensor qw = q_weight.defined() ? q_weight.contiguous() : Tensor();
  const Tensor kw = k_weight.defined() ? k_weight.contiguous() : Tensor();
  NormRopeArgs a = norm_rope_args(q, qw, eps, cos, sin, heads, r.q);
  a.x2 = k.raw_data();
  a.y2 = r.k.raw_data();
  if (kw.defined()) {
    a.w2 = kw.raw_data();
    a.w2_dtype = kw.dtype();
  }
  launch_norm_rope<true>(a, layout == ops::RopeLayout::Split, q.device().index);
  return r;
}

bool qk_norm_rope_d64_path(const Tensor& q, const Tensor& k) {
  const auto rows_ok = [](const Tensor& t) {
    return t.dtype() == DType::BF16 && t.dim() == 6 && t.size(5) == 64 && bf16_rows_loadable(t);
  };
  return rows_ok(q) && rows_ok(k);
}

ops::QkRope qk_norm_rope_3d(const Tensor& q, const Tensor& k, const Tensor& q_weight,
                            const Tensor& k_weight, double eps, float q_scale,
                            const ops::Rope3dTables& rope, const Tensor* out_q,
                            const Tensor* out_k) {
  LTX_CHECK((out_q == nullptr) == (out_k == nullptr), "qk_norm_rope_3d: give both outputs or none");
  ops::QkRope out{out_q != nullptr ? *out_q : Tensor::empty(q.shape(), q.dtype(), q.device()),
                  out_k != nullptr ? *out_k : Tensor::empty(k.shape(), k.dtype(), k.device())};
  for (const Tensor* o : {&out.q, &out.k})
    LTX_CHECK(o->shape() == q.shape() && o->dtype() == q.dtype() && o->device() == q.device() &&
                  o->stride(5) == 1,
              "qk_norm_rope_3d: an output must have q's shape, dtype and device and a dense head "
              "dim, got ", o->describe());
  if (q.numel() == 0) return out;
  const int64_t d = q.size(5);
  LTX_CHECK(d <= kQkNormRopeMaxDim, "qk_norm_rope_3d: head dim ", d, " above the CUDA kernel's ",
            kQkNormRopeMaxDim);
  QkRopeArgs a;
  const Tensor* xs[2] = {&q, &k};
  const Tensor* ws[2] = {&q_weight, &k_weight};
  Tensor wc[2];  // contiguous weights, kept alive until the launch is issued
  for (int s = 0; s < 2; ++s) {
    a.x[s] = xs[s]->raw_data();
    a.y[s] = (s == 0 ? out.q : out.k).raw_data();
    for (int i = 0; i <= QkRopeArgs::kLead; ++i) a.xst[s][i] = xs[s]->stride(i);
    for (int i = 0; i < QkRopeArgs::kLead; ++i) a.yst[s][i] = (s == 0 ? out.q : out.k).stride(i);
    if (ws[s]->defined()) {
      wc[s] = ws[s]->contiguous();
      a.w[s] = wc[s].raw_data();
      a.w_dtype[s] = wc[s].dtype();
    }
  }
  a.dtype = q.dtype();
  for (int i = 0; i < QkRopeArgs::kLead; ++i) a.size[i] = q.size(i);
  int start = 0;
  for (int ax = 0; ax < 3; ++ax) {
    const Tensor& c = rope.cos[ax];
    const Tensor& s = rope.sin[ax];
    a.cos[ax] = c.raw_data();
    a.sin[ax] = s.raw_data();
    a.c_dtype[ax] = c.dtype();
    a.s_dtype[ax] = s.dtype();
    for (int i = 0; i < 2; ++i) {
      a.cst[ax][i] = c.stride(i);
      a.sst[ax][i] = s.stride(i);
    }
    a.start[ax] = start;
    start += static_cast<int>(c.size(1));
  }
  a.start[3] = start;
  a.d = static_cast<int>(d);
  a.norm_threads = row_threads(d);
  a.rows = q.numel() / d;
  a.q_scale = q_scale;
  a.eps = eps;

  // The 32-bit row index path: a row's index within q or k below 2^31 (inactive look-ahead rows
  // decompose index 0), so its coordinates come from fast divisions.
  const bool row_index_32 = fast_div_fits(a.rows);
  if (row_index_32)
    for (int i = 0; i < QkRopeArgs::kLead; ++i) a.fdiv[i] = FastDivU32(static_cast<uint32_t>(a.size[i]));
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev).handle();
  bool small_tables = true;  // the head-dim-64 kernel takes 32-bit table offsets
  for (int ax = 0; ax < 3; ++ax)
    for (const Tensor* t : {&rope.cos[ax], &rope.sin[ax]})
      small_tables = small_tables && (t->size(0) - 1) * t->stride(0) + (t->size(1) - 1) * t->stride(1) <
                                         int64_t{INT32_MAX};
  if (small_tables && qk_norm_rope_d64_path(q, k) && qk_norm_rope_d64_path(out.q, out.k)) {
    const unsigned grid = grid_for((2 * a.rows + 3) / 4, kRope64Warps, dev);  // a warp per 4 rows
    if (row_index_32) {
      launch_rope64<uint32_t>(a, grid, stream);
    } else {
      launch_rope64<int64_t>(a, grid, stream);
    }
    LTX_CUDA_CHECK_LAUNCH();
    return out;
  }
  // Up to 8 warps (rows) per block, within 32 KiB of staged rows.
  const int warps = static_cast<int>(std::clamp<int64_t>(8192 / d, 1, 8));
  const size_t smem = static_cast<size_t>(warps) * static_cast<size_t>(d) * sizeof(float);
  const unsigned grid = grid_for(2 * a.rows, warps, dev);  // a warp per row
  if (row_index_32) {
    qk_norm_rope_kernel<uint32_t><<<grid, warps * 32, smem, stream>>>(a);
  } else {
    qk_norm_rope_kernel<int64_t><<<grid, warps * 32, smem, stream>>>(a);
  }
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace ltx::cuda
