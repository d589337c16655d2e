#include "backend/cuda/norm.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <type_traits>
#include <vector>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/fast_div.cuh"
#include "backend/cuda/rms_row.cuh"
#include "backend/reduce_plan.h"
#include "backend/scalar_math.h"
#include "backend/strided_layout.h"
#include "ops/dispatch.h"

namespace ltx::cuda {

namespace {

using dtype_bits::add_rn;
using dtype_bits::mul_rn;

struct RowArgs {
  const void* x;
  DType x_dtype;
  const void* w;  // null: no weight
  DType w_dtype;
  const void* b;  // null: no bias
  DType b_dtype;
  void* y;
  DType y_dtype;
  int64_t rows, d;
  double eps;
  // Segmented rows (seg > 0): x / y are views of `seg` dense rows per outer index (e.g. a
  // W-narrowed [B, T, H, W, C]), the outer index stepping x_outer / y_outer elements.
  int64_t seg = 0, x_outer = 0, y_outer = 0;
  bool seg_fast = false;  // every row index below 2^31: r / seg through fseg
  FastDivU32 fseg;
  // PixelNorm's vector kernel only: d values (x's dtype) added to each row before it is
  // normalised, the sum rounded to x's dtype (the bias of the conv that made x).
  const void* pre_bias = nullptr;
  // With pre_bias, bf16 rows of at most kDimResidualMaxD values only: a tensor laid out as x
  // added after the bias (rounded again: add_then_add_'s sums), the result stored at x_out (the
  // ResNet block's output, in place over x) and normalised.
  const void* pre_residual = nullptr;
  void* x_out = nullptr;
};

// Row r's first element: r * d, or (r / seg) * outer + (r % seg) * d for segmented rows.
__device__ __forceinline__ int64_t row_base(const RowArgs& a, int64_t r, int64_t outer) {
  if (a.seg == 0) return r * a.d;
  if (a.seg_fast) {
    uint32_t rem;
    const uint32_t q = a.fseg.divmod(static_cast<uint32_t>(r), &rem);
    return static_cast<int64_t>(q) * outer + static_cast<int64_t>(rem) * a.d;
  }
  if (r <= int64_t{UINT32_MAX} && a.seg <= int64_t{UINT32_MAX}) {
    const uint32_t rr = static_cast<uint32_t>(r), sg = static_cast<uint32_t>(a.seg);
    return static_cast<int64_t>(rr / sg) * outer + static_cast<int64_t>(rr % sg) * a.d;
  }
  return (r / a.seg) * outer + (r % a.seg) * a.d;
}

// 1 / RMS of the row starting at `base` (every thread of the block gets it).
__device__ float row_inv_rms(const RowArgs& a, int64_t base) {
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
    ss = add_square(ss, load_f32(a.x, a.x_dtype, base + i));
  }
  return inv_std(block_sum(ss), a.d, a.eps);
}

__global__ void rms_norm_kernel(RowArgs a) {
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    const float rs = row_inv_rms(a, base);
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      float y = mul_rn(load_f32(a.x, a.x_dtype, base + i), rs);
      if (a.w != nullptr) y = mul_rn(y, load_f32(a.w, a.w_dtype, i));
      store_f32(a.y, a.y_dtype, base + i, y);
    }
  }
}

// The operands of rms_norm_modulate's modulation: scale and shift, and the second summands of
// the ones given as an ops::Summed (null when not summed).
enum ModOperand : int { kScale, kShift, kScale2, kShift2, kModOperands };

// The most runs ModArgs maps (ops::Summed::run_ends).
constexpr int kMaxModRuns = static_cast<int>(ops::kMaxSummedRuns);

// Where the modulation operands live: x's leading dims (all but the last) with their broadcast
// strides, and their stride along the last dim.
struct ModArgs {
  int lead = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[kModOperands][kMaxDims] = {};
  int64_t last[kModOperands] = {};
  const void* p[kModOperands] = {};
  DType dtype[kModOperands] = {};
  bool bf16_sum[2] = {};  // scale's / shift's sum is stored as bf16 by the unfused ops::add
  bool fast = false;      // every row index below 2^31: the divisions go through fsize
  FastDivU32 fsize[kMaxDims];
  // Each operand's value is a bf16 (plain bf16, or a sum stored as bf16) and consecutive rows
  // share their operands' offsets (per-sample AdaLN values broadcast over the tokens, or per run
  // of tokens): the block-per-row kernels keep the row's values in shared memory as bf16 and
  // reload them only when a row with another key comes (set_row_cache). false: loaded per row.
  bool cache = false;
  // The row's key (ModOffsets::key): its lead indices (runs on the run dim) in mixed radix over
  // the dims some operand moves along, 0 on the others. Rows with one key have the same offsets,
  // so a cached row stays valid while the key does; one 32-bit value to compare instead of the
  // four offsets (the cache needs `fast`: every key below 2^31).
  uint32_t key_mul[kMaxDims] = {};
  // Runs (ops::Summed::run_ends, runs > 0): lead dim run_dim (x's dim -2) indexes the operands
  // by run, row t of that dim belonging to the first run r with t < run_end[r]; the operands'
  // strides along it step from run to run (0 for operands broadcast along it).
  int runs = 0;
  int run_dim = -1;
  int64_t run_end[kMaxModRuns] = {};
};

// One row's offsets of the modulation operands, and its key (ModArgs::key_mul).
struct ModOffsets {
  int64_t o[kModOperands] = {};
  uint32_t key = 0;
};

// A key no row has: the shared-memory caches start empty.
constexpr uint32_t kNoRowKey = 0xFFFFFFFFu;

// The run holding row t of the run dim (ModArgs::runs > 0): the number of run ends at or below t
// (the ends increase; the last one, the dim's size, is never reached).
template <typename Index>
__device__ __forceinline__ Index run_of(const ModArgs& m, Index t) {
  Index r = 0;
#pragma unroll
  for (int j = 0; j + 1 < kMaxModRuns; ++j)
    if (j + 1 < m.runs && static_cast<int64_t>(t) >= m.run_end[j]) ++r;
  return r;
}

// Offsets of row r's operands. The dims loop is unrolled over kMaxDims so that the arguments are
// indexed statically (no local-memory copy of the struct); Index: the type of the divisions
// (32-bit ones are several times cheaper than 64-bit ones).
template <typename Index>
__device__ __forceinline__ ModOffsets mod_offsets_as(const ModArgs& m, Index rem) {
  ModOffsets off;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 0; --d) {
    if (d < m.lead) {
      Index idx;
      rem = divmod_index<Index>(rem, m.size[d], m.fsize[d], &idx);
      if (d == m.run_dim) idx = run_of<Index>(m, idx);
#pragma unroll
      for (int k = 0; k < kModOperands; ++k) off.o[k] += static_cast<int64_t>(idx) * m.stride[k][d];
      off.key += static_cast<uint32_t>(idx) * m.key_mul[d];
    }
  }
  return off;
}

__device__ __forceinline__ ModOffsets mod_offsets(const ModArgs& m, int64_t r) {
  if (m.fast) return mod_offsets_as<uint32_t>(m, static_cast<uint32_t>(r));
  return mod_offsets_as<int64_t>(m, r);
}

// Element i of the row's scale (j = kScale) or shift (kShift): the operand, or the sum of its
// two summands as ops::add stores it.
__device__ __forceinline__ float mod_value(const ModArgs& m, int j, const ModOffsets& off, int64_t i) {
  const float v = load_f32(m.p[j], m.dtype[j], off.o[j] + i * m.last[j]);
  const int j2 = j + kScale2;
  if (m.p[j2] == nullptr) return v;
  return summed_value(v, load_f32(m.p[j2], m.dtype[j2], off.o[j2] + i * m.last[j2]), m.bf16_sum[j]);
}

// mod_value of elements i .. i + kVec - 1 (unit strides along the row, 16-byte aligned vectors).
__device__ __forceinline__ void mod_vec(const ModArgs& m, int j, const ModOffsets& off, int i,
                                        float (&v)[kVec]) {
  load_vec(m.p[j], m.dtype[j], off.o[j] + i, v);
  const int j2 = j + kScale2;
  if (m.p[j2] == nullptr) return;
  float w[kVec];
  load_vec(m.p[j2], m.dtype[j2], off.o[j2] + i, w);
#pragma unroll
  for (int k = 0; k < kVec; ++k) v[k] = summed_value(v[k], w[k], m.bf16_sum[j]);
}

// rms_norm_kernel's statistics (same thread layout and sums), then scalar::modulate.
__global__ void rms_norm_modulate_kernel(RowArgs a, ModArgs m) {
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    const float rs = row_inv_rms(a, base);
    const ModOffsets off = mod_offsets(m, r);
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      float n = mul_rn(load_f32(a.x, a.x_dtype, base + i), rs);
      if (a.w != nullptr) n = mul_rn(n, load_f32(a.w, a.w_dtype, i));
      const float y = round_to(a.x_dtype, n);
      const float sc = mod_value(m, kScale, off, i), sh = mod_value(m, kShift, off, i);
      store_f32(a.y, a.y_dtype, base + i, scalar::modulate(y, sc, sh));
    }
  }
}

// The dtypes of a vector row kernel's staged row (x's) and output: bf16 where the kernel is
// instantiated for bf16 rows (kBf16), so that the dtype checks fold away at compile time (fewer
// registers: the 6-block kernels spilled with both dtype paths live); else read from the
// arguments.
template <bool kBf16>
__device__ __forceinline__ DType row_x_dtype(const RowArgs& a) {
  return kBf16 ? DType::BF16 : a.x_dtype;
}
template <bool kBf16>
__device__ __forceinline__ DType row_y_dtype(const RowArgs& a) {
  return kBf16 ? DType::BF16 : a.y_dtype;
}

// The row weight of a vector row kernel: a.w, or null where the kernel is instantiated for rows
// without one (kWeight false: the per-chunk weight test and its predicated multiplies fold away;
// the transformer's norms have no weight).
template <bool kWeight>
__device__ __forceinline__ const void* row_weight(const RowArgs& a) {
  return kWeight ? a.w : nullptr;
}

// rms_norm_modulate's per-element math on a vector of x's values: normalised with the row scale rs
// (weighted by w when `weighted`), rounded as rms_norm stores it (x_dtype), then modulated.
__device__ __forceinline__ void modulate_vec(bool weighted, DType x_dtype, float (&v)[kVec],
                                             float rs, const float (&w)[kVec],
                                             const float (&sc)[kVec], const float (&sh)[kVec]) {
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    v[j] = mul_rn(v[j], rs);
    if (weighted) v[j] = mul_rn(v[j], w[j]);
  }
  round_vec_to(x_dtype, v);
#pragma unroll
  for (int j = 0; j < kVec; ++j) v[j] = scalar::modulate(v[j], sc[j], sh[j]);
}

// Elements i .. i + kVec - 1 of a staged row (x's dtype) normalised with the row scale rs and
// weighted when there is a weight (rms_norm's value), then for rms_norm_modulate rounded as
// rms_norm stores it and modulated; stored as one vector: the general kernels' per-element math.
// kBf16: x and the output are bf16 (row_x_dtype); kWeight false: no weight (row_weight).
template <bool kModulate, bool kBf16 = false, bool kWeight = true>
__device__ __forceinline__ void rms_store_values(const RowArgs& a, const ModArgs& m, float (&v)[kVec],
                                                 int i, float rs, const ModOffsets& off,
                                                 void* y_row, const uint16_t* cache = nullptr) {
  if constexpr (kModulate) {
    float sc[kVec], sh[kVec];
    if (cache != nullptr) {  // the row's scale and shift as bf16 (fill_mod_cache)
      load_vec(cache, DType::BF16, i, sc);
      load_vec(cache + a.d, DType::BF16, i, sh);
    } else {
      mod_vec(m, kScale, off, i, sc);
      mod_vec(m, kShift, off, i, sh);
    }
    const void* wp = row_weight<kWeight>(a);
    float w[kVec] = {};
    if (wp != nullptr) load_vec(wp, a.w_dtype, i, w);
    modulate_vec(wp != nullptr, row_x_dtype<kBf16>(a), v, rs, w, sc, sh);
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = mul_rn(v[j], rs);
    if (const void* wp = row_weight<kWeight>(a); wp != nullptr) {
      float w[kVec];
      load_vec(wp, a.w_dtype, i, w);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = mul_rn(v[j], w[j]);
    }
  }
  store_vec_global(y_row, row_y_dtype<kBf16>(a), i, v);
}
template <bool kModulate, bool kBf16 = false, bool kWeight = true>
__device__ __forceinline__ void rms_store_chunk(const RowArgs& a, const ModArgs& m,
                                                const uint4* row_smem, int i, float rs,
                                                const ModOffsets& off, void* y_row,
                                                const uint16_t* cache = nullptr) {
  float v[kVec];
  load_vec(row_smem, row_x_dtype<kBf16>(a), i, v);
  rms_store_values<kModulate, kBf16, kWeight>(a, m, v, i, rs, off, y_row, cache);
}

// Writes operands `first` and `first + 1` of m (kScale, kShift: scale and shift; or kScale alone
// when m.p[kShift] is null) of the row at `off` into `cache` as bf16, d values each, chunk c by
// thread c % blockDim: the chunks each thread later reads itself (the chunk loops of the
// block-per-row kernels assign them the same way), so no barrier is needed between the two.
__device__ __forceinline__ void fill_mod_cache(const ModArgs& m, const ModOffsets& off, int d,
                                               uint16_t* cache) {
  for (int c = threadIdx.x; c < d / kVec; c += blockDim.x) {
    float v[kVec];
    mod_vec(m, kScale, off, c * kVec, v);
    store_vec(cache, DType::BF16, c * kVec, v);
    if (m.p[kShift] != nullptr) {
      mod_vec(m, kShift, off, c * kVec, v);
      store_vec(cache + d, DType::BF16, c * kVec, v);
    }
  }
}

// The vector path of rms_norm (kModulate false) and rms_norm_modulate (true), taken when
// rows_vec_ok holds: d % kVec == 0, every operand f32 or bf16 with 16-byte aligned vectors. The
// row is staged in shared memory with 16-byte loads; the sum of squares then runs over the staged
// row in the general kernels' order (thread t sums elements t, t + blockDim, ... with the same
// blockDim and block_sum), so the row's scale is the same float, and the outputs go out as
// 16-byte vectors with the general kernels' per-element math: bit-identical results, x read from
// memory once.
// kBf16: instantiated for bf16 x and output (row_x_dtype); kWeight false: for rows without a weight
// (row_weight; the bf16 rows without one get their own instantiation). kPrefetch (a grid of
// resident blocks, each taking rows r, r + gridDim, ...): rows alternate between two staging
// buffers, the next row's copy (stage_row_async) in flight while the block works on the current
// one.
template <bool kModulate, bool kBf16, bool kWeight, bool kPrefetch = false>
__global__ void __launch_bounds__(kMaxRowThreads, kRowNormMinBlocks) rms_norm_vec_kernel(RowArgs a, ModArgs m) {
  extern __shared__ uint4 row_smem[];
  const int d = static_cast<int>(a.d);
  const DType x_dtype = row_x_dtype<kBf16>(a);
  const int x_bytes = x_dtype == DType::BF16 ? 2 : 4;
  const int y_bytes = row_y_dtype<kBf16>(a) == DType::BF16 ? 2 : 4;
  const int chunks = d / kVec;
  // With m.cache: scale and shift as bf16 after the staged row (2 d values).
  uint16_t* cache = kModulate && m.cache ? reinterpret_cast<uint16_t*>(row_smem + d * x_bytes / 16)
                                         : nullptr;
  // kPrefetch: the second staging buffer, after the cache.
  uint4* const row_other = row_smem + (d * x_bytes + (cache != nullptr ? 4 * d : 0)) / 16;
  const auto x_row = [&](int64_t r) {
    return static_cast<const char*>(a.x) + row_base(a, r, a.x_outer) * x_bytes;
  };
  if (kPrefetch && blockIdx.x < a.rows) stage_row_async(x_row(blockIdx.x), x_dtype, d, row_smem);
  uint32_t cached = kNoRowKey;
  bool odd = false;  // kPrefetch: the row is staged in row_other
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x, odd = !odd) {
    // Stores through the row's pointer with a chunk index: with an index that is not visibly a
    // multiple of kVec (`a.y, base + i`) nvcc splits the vector stores into 4-byte ones.
    void* y_row = static_cast<char*>(a.y) + row_base(a, r, a.y_outer) * y_bytes;
    ModOffsets off;
    if constexpr (kModulate) {
      off = mod_offsets(m, r);
      if (cache != nullptr && off.key != cached) {  // block-uniform
        fill_mod_cache(m, off, d, cache);
        cached = off.key;
      }
    }
    const uint4* row = kPrefetch && odd ? row_other : row_smem;
    float rs;
    if constexpr (kPrefetch) {
      stage_next_then_wait(r + gridDim.x < a.rows, [&] {
        stage_row_async(x_row(r + gridDim.x), x_dtype, d, odd ? row_smem : row_other);
      });
      rs = staged_row_inv_rms(x_dtype, d, a.eps, row);
    } else {
      rs = stage_row_inv_rms(x_row(r), x_dtype, d, a.eps, row_smem);
    }
    for (int c = threadIdx.x; c < chunks; c += blockDim.x)
      rms_store_chunk<kModulate, kBf16, kWeight>(a, m, row, c * kVec, rs, off, y_row, cache);
    __syncthreads();  // every thread is done with the staged row before it is overwritten
  }
}

// scalar::gated_add(x, y, g, true) on kVec values (x, y, g bf16 values): the eight products
// rounded to bf16 together (round_vec_to), then the sums.
__device__ __forceinline__ void gated_add_bf16_vec(float (&x)[kVec], const float (&y)[kVec],
                                                   const float (&g)[kVec]) {
  float p[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) p[j] = mul_rn(y[j], g[j]);
  round_vec_to(DType::BF16, p);
#pragma unroll
  for (int j = 0; j < kVec; ++j) x[j] = add_rn(x[j], p[j]);
}

// Shared-memory bytes per row element of gated_add_rms_norm_modulate_kernel: the staged row (2),
// the cached scale, shift and gate (6) or also the second scale and shift (10), the prefetched
// next x and y (4).
__host__ __device__ constexpr int residual_norm_smem_per_element(bool cached, bool two, bool prefetch) {
  return 2 + (cached ? (two ? 10 : 6) : 0) + (prefetch ? 4 : 0);
}

// ops::gated_add_rms_norm_modulate in one pass over bf16 rows (contiguous x, y; the gate in
// g's kScale / kScale2 slots; scale / shift in m; a.x: x, a.y: h): a block per row forms x_next =
// x + gate * y with gated_add's arithmetic (the product rounded to bf16, then the sum), stores it
// and stages it in shared memory, then runs rms_norm_vec_kernel's statistics and modulation on the
// staged row: both results bit-identical to the two ops, x_next never read back from memory.
// kTwo: a second modulation of the same norm (m2, stored at h2; its runs are m's when cached,
// its scale and shift cached after the gate): gated_add_rms_norm_modulate2's two AdaLN inputs.
// kPrefetch (a grid of resident blocks, each taking rows r, r + gridDim, ...): the next row's x
// and y are copied into shared memory with cp.async while the block reduces and modulates the
// current one, so that the loads' latency (the kernels' largest stall, Nsight Compute, session
// 20) overlaps work; each thread copies the chunks it reads itself (no barrier needed).
template <bool kTwo, bool kPrefetch>
__global__ void __launch_bounds__(kMaxRowThreads, kResidualNormMinBlocks)
    gated_add_rms_norm_modulate_kernel(RowArgs a, ModArgs m, ModArgs g, const void* y, void* x_next,
                                       ModArgs m2, void* h2) {
  extern __shared__ uint4 residual_row[];
  const int d = static_cast<int>(a.d), chunks = d / kVec;
  // With m.cache (then g's and m2's too): scale, shift, then the gate as bf16 after the row.
  uint16_t* cache = m.cache ? reinterpret_cast<uint16_t*>(residual_row + d * 2 / 16) : nullptr;
  uint16_t* cache2 = kTwo && cache != nullptr ? cache + 3 * d : nullptr;
  // kPrefetch: the next row's x, then its y, after the cache (residual_norm_smem's layout).
  uint4* const xy = residual_row + d * residual_norm_smem_per_element(cache != nullptr, kTwo, false) / 16;
  const auto prefetch = [&](int64_t r) {  // thread t copies vectors (chunks) t, t + blockDim, ...
    copy_row_async(static_cast<const uint16_t*>(a.x) + r * a.d, DType::BF16, d, xy);
    copy_row_async(static_cast<const uint16_t*>(y) + r * a.d, DType::BF16, d, xy + chunks);
    mma::cp_async_commit();
  };
  if (kPrefetch && blockIdx.x < a.rows) prefetch(blockIdx.x);
  uint32_t cached = kNoRowKey, gcached = kNoRowKey, cached2 = kNoRowKey;
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    const ModOffsets goff = mod_offsets(g, r);
    const ModOffsets off = mod_offsets(m, r);
    ModOffsets off2;
    if constexpr (kTwo) off2 = mod_offsets(m2, r);
    if (cache != nullptr && (off.key != cached || goff.key != gcached ||
                             (kTwo && off2.key != cached2))) {  // block-uniform
      fill_mod_cache(m, off, d, cache);
      fill_mod_cache(g, goff, d, cache + 2 * d);
      if constexpr (kTwo) fill_mod_cache(m2, off2, d, cache2);
      cached = off.key;
      gcached = goff.key;
      cached2 = off2.key;
    }
    if constexpr (kPrefetch) mma::cp_async_wait<0>();
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      const int i = c * kVec;
      float xv[kVec], yv[kVec], gv[kVec];
      if constexpr (kPrefetch) {
        unpack_bf16x8(xy[c], xv);
        unpack_bf16x8(xy[chunks + c], yv);
      } else {
        load_vec(a.x, DType::BF16, base + i, xv);
        load_vec(y, DType::BF16, base + i, yv);
      }
      if (cache != nullptr) {
        load_vec(cache + 2 * d, DType::BF16, i, gv);
      } else {
        mod_vec(g, kScale, goff, i, gv);
      }
      gated_add_bf16_vec(xv, yv, gv);
      const uint4 q = pack_bf16x8(xv);
      store_global_bf16x8(static_cast<uint16_t*>(x_next) + base, i, q);
      residual_row[c] = q;
    }
    const float rs = staged_row_inv_rms(DType::BF16, d, a.eps, residual_row);
    if (kPrefetch && r + gridDim.x < a.rows) prefetch(r + gridDim.x);  // this thread's reads are done
    void* h_row = static_cast<uint16_t*>(a.y) + base;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      rms_store_chunk<true, true, false>(a, m, residual_row, c * kVec, rs, off, h_row, cache);
      if constexpr (kTwo)
        rms_store_chunk<true, true, false>(a, m2, residual_row, c * kVec, rs, off2,
                              static_cast<uint16_t*>(h2) + base, cache2);
    }
    __syncthreads();  // every thread is done with the staged row before the next row overwrites it
  }
}

// Rows of at most kWarpRowMaxD elements on the vector path: one warp per row, no block barriers
// (a block per row spends most of its time synchronising on short rows: the diffusion decoder's
// 256-wide rows, Gemma's head norms). The sum of squares is rms_norm_vec_kernel's bit for bit:
// lane l plays threads l + 32 w (w < W = row_threads(d) / 32), each summing its elements in the
// same order, then each thread-warp's butterfly (warp_sum of one w across the lanes), then the
// block's final warp_sum over [s_0 .. s_W-1, 0, ...], whose zero terms add nothing, replayed in
// registers (pairs w, w + W/2 first, down to w, w + 1).
constexpr int64_t kWarpRowMaxD = 1024;
constexpr int kWarpRowWarps = 8;

template <bool kModulate>
__global__ void __launch_bounds__(kWarpRowWarps * 32) rms_norm_warp_kernel(RowArgs a, ModArgs m) {
  extern __shared__ uint4 warp_rows_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int d = static_cast<int>(a.d);
  const int x_bytes = a.x_dtype == DType::BF16 ? 2 : 4, y_bytes = a.y_dtype == DType::BF16 ? 2 : 4;
  const int vecs = d * x_bytes / 16, chunks = d / kVec;
  const int threads = row_threads(a.d), W = threads / 32;
  uint4* row_smem = warp_rows_smem + static_cast<int64_t>(warp) * (kWarpRowMaxD * 4 / 16);
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpRowWarps;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpRowWarps + warp; r < a.rows; r += step) {
    const auto* src = reinterpret_cast<const uint4*>(static_cast<const char*>(a.x) +
                                                     row_base(a, r, a.x_outer) * x_bytes);
    void* y_row = static_cast<char*>(a.y) + row_base(a, r, a.y_outer) * y_bytes;
    for (int j = lane; j < vecs; j += 32) row_smem[j] = src[j];
    __syncwarp();
    float part[8];  // part[w]: thread l + 32 w's sum, then its warp's butterfly
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      float ss = 0.f;
      if (w < W) {
        if (a.x_dtype == DType::BF16) {
          const uint16_t* xs = reinterpret_cast<const uint16_t*>(row_smem);
          for (int i = lane + 32 * w; i < d; i += threads) ss = add_square(ss, dtype_bits::bf16_to_f32(xs[i]));
        } else {
          const float* xs = reinterpret_cast<const float*>(row_smem);
          for (int i = lane + 32 * w; i < d; i += threads) ss = add_square(ss, xs[i]);
        }
        ss = warp_sum(ss);
      }
      part[w] = ss;
    }
#pragma unroll
    for (int h = 4; h >= 1; h >>= 1) {
#pragma unroll
      for (int w = 0; w < 4; ++w)
        if (w < h && h < W) part[w] = part[w] + part[w + h];
    }
    const float rs = inv_std(part[0], a.d, a.eps);
    ModOffsets off;
    if constexpr (kModulate) off = mod_offsets(m, r);
    for (int c = lane; c < chunks; c += 32)
      rms_store_chunk<kModulate>(a, m, row_smem, c * kVec, rs, off, y_row);
    __syncwarp();  // the warp is done with its row before the next one overwrites it
  }
}

// bf16 rows of exactly 256 (the diffusion decoder's stage 5): one warp per row, lane l holds
// elements 8 l .. 8 l + 7 in registers (one 16-byte load, one 16-byte store, no shared memory).
// rms_norm's block for d = 256 is 256 threads, one element each: warp w's butterfly over
// elements 32 w .. 32 w + 31 (held by lanes 4 w .. 4 w + 3: warp_sum_of_4x8), then the final
// warp_sum over the 8 warp sums, whose pairs (w, w ^ 4), (w, w ^ 2), (w, w ^ 1) are lanes 16, 8
// and 4 apart. The same row scale bit for bit, and rms_store_values' per-element math.
template <bool kModulate>
__global__ void __launch_bounds__(kWarpRowWarps * 32) rms_norm_row256_kernel(RowArgs a, ModArgs m) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int e0 = 8 * lane;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpRowWarps;
  int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpRowWarps + warp;
  const auto fetch = [&](int64_t row) {
    if (row >= a.rows) return make_uint4(0, 0, 0, 0);
    return reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(a.x) +
                                          row_base(a, row, a.x_outer))[lane];
  };
  // The lane's weights, and its scale / shift values of the last modulation row read: rows that
  // share their modulation (all of them when it broadcasts over x's rows) load it once.
  float w[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) w[k] = 1.f;
  if (a.w != nullptr) load_vec(a.w, a.w_dtype, e0, w);
  float sc[kVec] = {}, sh[kVec] = {};
  ModOffsets have;
  bool loaded = false;
  uint4 data = fetch(r);
  for (; r < a.rows; r += step) {
    const uint4 next = fetch(r + step);  // the next row in flight while this one is worked on
    const uint32_t words[4] = {data.x, data.y, data.z, data.w};
    float v[kVec], sq[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      v[k] = dtype_bits::bf16_to_f32(static_cast<uint16_t>(words[k / 2] >> (16 * (k & 1))));
      sq[k] = add_square(0.f, v[k]);
    }
    float ss = warp_sum_of_4x8(sq, lane & 3);
    ss += __shfl_xor_sync(0xffffffffu, ss, 16);
    ss += __shfl_xor_sync(0xffffffffu, ss, 8);
    ss += __shfl_xor_sync(0xffffffffu, ss, 4);
    const float rs = inv_std(ss, 256, a.eps);
    void* y_row =
        static_cast<char*>(a.y) + row_base(a, r, a.y_outer) * (a.y_dtype == DType::BF16 ? 2 : 4);
    if constexpr (kModulate) {
      const ModOffsets off = mod_offsets(m, r);
      bool same = loaded;
#pragma unroll
      for (int k = 0; k < kModOperands; ++k) same = same && off.o[k] == have.o[k];
      if (!same) {
        mod_vec(m, kScale, off, e0, sc);
        mod_vec(m, kShift, off, e0, sh);
        have = off;
        loaded = true;
      }
      modulate_vec(a.w != nullptr, a.x_dtype, v, rs, w, sc, sh);
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        v[j] = mul_rn(v[j], rs);
        if (a.w != nullptr) v[j] = mul_rn(v[j], w[j]);
      }
    }
    store_vec(y_row, a.y_dtype, e0, v);
    data = next;
  }
}

__global__ void layer_norm_kernel(RowArgs a) {
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    // The sum runs over x - x[0]: an f32 sum of values far from zero (mean 1e4, spread 1) would
    // lose the mean's low bits, while the shifted sum keeps it to ~1e-7 of the spread.
    const float shift = load_f32(a.x, a.x_dtype, base);
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x)
      s += load_f32(a.x, a.x_dtype, base + i) - shift;
    const double sum = block_sum(s);
    const float mean = static_cast<float>(shift + sum / static_cast<double>(a.d));
    float ssd = 0.f;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      const float dv = load_f32(a.x, a.x_dtype, base + i) - mean;
      ssd += dv * dv;
    }
    const float rs = inv_std(block_sum(ssd), a.d, a.eps);
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      float y = mul_rn(add_rn(load_f32(a.x, a.x_dtype, base + i), -mean), rs);
      if (a.w != nullptr) y = mul_rn(y, load_f32(a.w, a.w_dtype, i));
      if (a.b != nullptr) y = add_rn(y, load_f32(a.b, a.b_dtype, i));
      store_f32(a.y, a.y_dtype, base + i, y);
    }
  }
}

// PixelNorm (rms_norm_dim): one summation order for every kernel and layout, so that a
// channels-last activation and its contiguous copy normalise to the same bits. The d values of a
// row (or column) form chunks of 8 consecutive elements (one 16-byte bf16 vector); element r goes
// to partial p[(r / 8) % 32], each partial summed in increasing r in double (a float's square is
// exact in double, so fused or not every term rounds the same), then p[l] = p[l] + p[l + s] for
// l < s, s = 16, 8, 4, 2, 1; the sum of squares is p[0]. A warp reading a row chunk by chunk
// (lane l: chunks l, l + 32, ...) holds p[l] in lane l, and the xor butterfly over lanes 16 .. 1
// leaves p[0] in every lane bit for bit (it adds the tree's pairs; a + b == b + a). Empty
// partials, and zero chunks added past the row's end, are +0, which changes no sum (all sums are
// >= +0), so a row of at most 8 g chunks (g a power of 2) needs only g lanes and the levels s < g.
// The RMS is float(sqrt(ss / d + eps)) and y = x / rms with an IEEE f32 division per element, like
// the CPU's (PixelNorm divides by the RMS rather than multiplying by its inverse). kSilu (the
// fused rms_norm_dim_silu): each kernel stores silu(y) instead, through dim_out.
constexpr int kDimChunk = 8;
constexpr int kDimPartials = 32;
// The longest rows the residual's kernel takes: 4 chunks a lane, held in registers.
constexpr int64_t kDimResidualMaxD = 4 * 32 * kDimChunk;

__device__ __forceinline__ double add_square_d(double ss, float v) {
  const double dv = v;
  return ss + dv * dv;
}

__device__ __forceinline__ float dim_rms(double ss, int64_t d, double eps) {
  // ss / d is exact as ss * (1 / d) when d is a power of two (the VAE's 128 / 256 / 512
  // channels): a multiply instead of a double division in each row's dependent chain.
  const double mean = (d & (d - 1)) == 0 ? ss * (1.0 / static_cast<double>(d))
                                         : ss / static_cast<double>(d);
  return static_cast<float>(sqrt(mean + eps));
}

// x / rms, bit for bit the IEEE quotient, given inv = 1 / rms (rounded to nearest once per row):
// q = x inv is within an ulp of x / rms, x - q rms is exact in one FMA, and q + (x - q rms) inv
// rounds to the correctly rounded quotient (Markstein's theorem), as long as nothing under- or
// overflows; outside that range (zeros, denormals, huge values) the division itself. Checked
// against the division for every finite bf16 x and 20000 rms values over 2^-60 .. 2^60.
__device__ __forceinline__ float div_by_rms(float x, float rms, float inv) {
  const float q = __fmul_rn(x, inv);
  const float ax = fabsf(x), aq = fabsf(q);
  if (ax >= 0x1p-96f && ax <= 0x1p96f && aq >= 0x1p-64f && aq <= 0x1p64f)
    return __fmaf_rn(__fmaf_rn(-q, rms, x), inv, q);
  return x / rms;
}

// The value stored for the normalised y: y, or (kSilu) ops::silu's function of y rounded to the
// output dtype first, as rms_norm_dim stores y and silu reloads it.
template <bool kSilu>
__device__ __forceinline__ float dim_out(float y, [[maybe_unused]] DType y_dtype) {
  if constexpr (kSilu) {
    if (y_dtype == DType::BF16) y = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(y));
    return scalar::unary<ops::UnaryOp::Silu>(y);
  } else {
    return y;
  }
}

// The butterfly over aligned groups of `lanes` lanes (a power of 2, at most 32).
__device__ __forceinline__ double dim_lanes_sum(double ss, int lanes) {
  for (int s = lanes / 2; s >= 1; s >>= 1) ss = ss + __shfl_xor_sync(0xffffffffu, ss, s);
  return ss;
}

// One level of the partials' tree: p[l] = p[l] + p[l + S] for l < S (static indices).
template <int S>
__device__ __forceinline__ void dim_tree_level(double (&p)[kDimPartials]) {
#pragma unroll
  for (int l = 0; l < S; ++l) p[l] = p[l] + p[l + S];
}

// PixelNorm over the middle dim of [A, R, B] (x contiguous): one thread per (a, b) column,
// neighbouring threads on neighbouring columns, the 32 partials of the order above in registers
// (static indices), combined by the same tree.
template <bool kSilu>
__global__ void rms_norm_dim_kernel(RowArgs a, int64_t outer, int64_t inner) {
  const int64_t n = outer * inner, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < n; o += step) {
    const int64_t base = (o / inner) * a.d * inner + o % inner;
    double p[kDimPartials];
#pragma unroll
    for (int q = 0; q < kDimPartials; ++q) p[q] = 0.0;
    for (int64_t r0 = 0; r0 < a.d; r0 += kDimChunk * kDimPartials) {
#pragma unroll
      for (int q = 0; q < kDimPartials; ++q) {
        const int64_t e0 = r0 + q * kDimChunk;
        const int64_t e1 = e0 + kDimChunk < a.d ? e0 + kDimChunk : a.d;
        for (int64_t r = e0; r < e1; ++r)
          p[q] = add_square_d(p[q], load_f32(a.x, a.x_dtype, base + r * inner));
      }
    }
    dim_tree_level<16>(p);
    dim_tree_level<8>(p);
    dim_tree_level<4>(p);
    dim_tree_level<2>(p);
    dim_tree_level<1>(p);
    const float rms = dim_rms(p[0], a.d, a.eps);
    for (int64_t r = 0; r < a.d; ++r) {
      const int64_t i = base + r * inner;
      store_f32(a.y, a.y_dtype, i, dim_out<kSilu>(load_f32(a.x, a.x_dtype, i) / rms, a.y_dtype));
    }
  }
}

// The row kernels below: rows whose normalised dim is innermost in memory (PixelNorm of a
// channels-last activation, [positions, d] dense), a warp per row (or per 32 / g rows of g lanes),
// grid-strided over the rows (blocks of kDimRowsWarps warps, dim_rows_grid).
constexpr int kDimRowsWarps = 8;

// Any d, any alignment, any f32 / bf16 mix: lane l sums chunks l, l + 32, ... with scalar loads,
// then the butterfly; the output pass reads and writes coalesced.
template <bool kSilu>
__global__ void __launch_bounds__(kDimRowsWarps * 32) rms_norm_dim_rows_kernel(RowArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kDimRowsWarps;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kDimRowsWarps + threadIdx.x / 32; r < a.rows;
       r += step) {
    const int64_t base = r * a.d;
    double ss = 0.0;
    for (int64_t e0 = int64_t{lane} * kDimChunk; e0 < a.d; e0 += 32 * kDimChunk) {
      const int64_t e1 = e0 + kDimChunk < a.d ? e0 + kDimChunk : a.d;
      for (int64_t e = e0; e < e1; ++e) ss = add_square_d(ss, load_f32(a.x, a.x_dtype, base + e));
    }
    const float rms = dim_rms(dim_lanes_sum(ss, 32), a.d, a.eps);
    for (int64_t e = lane; e < a.d; e += 32) {
      const float y = load_f32(a.x, a.x_dtype, base + e) / rms;
      store_f32(a.y, a.y_dtype, base + e, dim_out<kSilu>(y, a.y_dtype));
    }
  }
}

// One chunk (8 elements of kDt, f32 or bf16) as raw 16-byte words: loaded ahead without being
// unpacked, so that nothing waits on the load until the values are used.
template <DType kDt>
struct DimChunkBits {
  uint4 w[kDt == DType::BF16 ? 1 : 2];
};

template <DType kDt>
__device__ __forceinline__ float chunk_value(const DimChunkBits<kDt>& c, int j) {
  const uint4& q = c.w[kDt == DType::BF16 ? 0 : j / 4];
  const int k = kDt == DType::BF16 ? j / 2 : j % 4;
  const uint32_t word = k == 0 ? q.x : k == 1 ? q.y : k == 2 ? q.z : q.w;
  if constexpr (kDt == DType::BF16) {
    return dtype_bits::bf16_to_f32(static_cast<uint16_t>(word >> (16 * (j & 1))));
  } else {
    return __uint_as_float(word);
  }
}

// Chunk c of a row as whole 16-byte loads (a chunk read through a reference is loaded word by
// word, as its values are used).
template <DType kDt>
__device__ __forceinline__ DimChunkBits<kDt> load_chunk(const char* row, int c) {
  DimChunkBits<kDt> q;
  constexpr int kWords = sizeof(q.w) / sizeof(uint4);
  const uint4* p = reinterpret_cast<const uint4*>(row) + int64_t{c} * kWords;
#pragma unroll
  for (int w = 0; w < kWords; ++w) q.w[w] = p[w];
  return q;
}

// c + b (chunk c of the bias), rounded to kDt per value as the bias add would store it. bf16: one
// bf16x2 FMA per pair, c * 1 + b rounded once to nearest even: the f32 sum rounded to bf16 (the
// f32 sum of two bf16 values is exact or too far from a bf16 tie to round onto one: 24 >= 2 x 8 +
// 2 bits), which differs from f32_to_bf16 only in a NaN's bits (a NaN makes the whole row NaN
// either way, stored canonically).
template <DType kDt>
__device__ __forceinline__ DimChunkBits<kDt> add_chunk_bias(const DimChunkBits<kDt>& c,
                                                            const DimChunkBits<kDt>& b) {
  DimChunkBits<kDt> out;
  if constexpr (kDt == DType::BF16) {
    constexpr uint32_t kOnes = 0x3f803f80u;  // bf16 1.0 in both halves
    const uint32_t cw[4] = {c.w[0].x, c.w[0].y, c.w[0].z, c.w[0].w};
    const uint32_t bw[4] = {b.w[0].x, b.w[0].y, b.w[0].z, b.w[0].w};
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
      asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(w[j]) : "r"(cw[j]), "r"(kOnes), "r"(bw[j]));
    out.w[0] = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    float v[kDimChunk];
#pragma unroll
    for (int j = 0; j < kDimChunk; ++j) v[j] = chunk_value(c, j) + chunk_value(b, j);
    out.w[0] = make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]),
                          __float_as_uint(v[3]));
    out.w[1] = make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]), __float_as_uint(v[6]),
                          __float_as_uint(v[7]));
  }
  return out;
}

template <DType kDt>
__device__ __forceinline__ double add_chunk_squares(double ss, const DimChunkBits<kDt>& c) {
#pragma unroll
  for (int j = 0; j < kDimChunk; ++j) ss = add_square_d(ss, chunk_value(c, j));
  return ss;
}

// Chunk `c` of a row divided by rms (then dim_out), stored at chunk c of y_row as one or two
// 16-byte vectors.
template <DType kDt, bool kSilu>
__device__ __forceinline__ void store_chunk_over(void* y_row, int c, const DimChunkBits<kDt>& q,
                                                 float rms, float inv) {
  float v[kDimChunk];
#pragma unroll
  for (int j = 0; j < kDimChunk; ++j) v[j] = dim_out<kSilu>(div_by_rms(chunk_value(q, j), rms, inv), kDt);
  store_vec(y_row, kDt, int64_t{c} * kDimChunk, v);
}

// SiLU of a bf16 value as a table lookup (rms_norm_dim_silu's vector kernel on bf16): the fused
// kernel is bound by instruction issue with expf and a division per element (1.7 TB/s against
// 3.2 for the plain PixelNorm, session 14), while the normalised value it applies SiLU to is
// rounded to bf16 first, so the result is a function of 16 bits. The table holds
// f32_to_bf16(silu(v)) for every bf16 v with 2^-32 <= |v| < 2^6 (PixelNorm's outputs are at most
// sqrt(d) in magnitude), computed on the device by the same scalar::unary<Silu> as ops::silu;
// other values (zeros, tiny, huge, inf, NaN) are computed. Index: (bits & 0x7fff) - the first
// entry's, plus kSiluTableHalf for negative values.
constexpr uint32_t kSiluTableFirst = (127u - 32u) << 7;  // bits of 2^-32
constexpr uint32_t kSiluTableHalf = 38u << 7;            // 38 binades of 128 values: 2^-32 .. 2^6
constexpr uint32_t kSiluTableSize = 2 * kSiluTableHalf;  // 9728 entries, 19 KiB

__device__ __forceinline__ uint16_t silu_bf16_computed(uint32_t bits) {
  return dtype_bits::f32_to_bf16(
      scalar::unary<ops::UnaryOp::Silu>(dtype_bits::bf16_to_f32(static_cast<uint16_t>(bits))));
}

__global__ void fill_silu_bf16_table_kernel(uint16_t* table) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < kSiluTableSize;
       i += gridDim.x * blockDim.x) {
    const uint32_t sign = i >= kSiluTableHalf ? 0x8000u : 0u;
    table[i] = silu_bf16_computed(sign | (kSiluTableFirst + i % kSiluTableHalf));
  }
}

__device__ __forceinline__ uint32_t silu_bf16_bits(uint32_t bits, const uint16_t* table) {
  const uint32_t u = (bits & 0x7fffu) - kSiluTableFirst;  // wraps above the table for tiny values
  if (u < kSiluTableHalf) return table[u + (bits >> 15) * kSiluTableHalf];
  return silu_bf16_computed(bits);
}

// The device's table (filled once, on first use outside a graph capture), or null while it is not
// there yet: the kernels then compute every SiLU.
const uint16_t* silu_bf16_table(int dev, cudaStream_t stream) {
  static std::mutex mu;
  static auto* tables = new std::vector<uint16_t*>();
  std::lock_guard<std::mutex> lock(mu);
  if (tables->empty()) tables->assign(static_cast<size_t>(device_count()), nullptr);
  uint16_t*& t = (*tables)[static_cast<size_t>(dev)];
  if (t == nullptr && !is_capturing(Stream(stream, dev))) {
    // Kept for the process's lifetime, like the device's library handles.
    LTX_CUDA_CHECK(cudaMalloc(&t, kSiluTableSize * sizeof(uint16_t)));
    fill_silu_bf16_table_kernel<<<(kSiluTableSize + 255) / 256, 256, 0, stream>>>(t);
    LTX_CUDA_CHECK_LAUNCH();
    // Once per process: then every stream may read it without an event.
    LTX_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return t;
}

// Per-halfword unsigned min / max (one instruction each on sm_90).
__device__ __forceinline__ uint32_t min_u16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t r;
  asm("min.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  return __vminu2(a, b);
#endif
}
__device__ __forceinline__ uint32_t max_u16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t r;
  asm("max.u16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
#else
  return __vmaxu2(a, b);
#endif
}

// The row's scale for the SiLU-table store: rms, inv = 1 / rms, and the range of x's bf16
// magnitudes (bits & 0x7fff) for which a chunk takes the branch-free path of
// store_chunk_silu_table: zeros, and lo .. hi. There x / rms is Markstein's two FMAs without
// div_by_rms's range checks, and the bf16 quotient indexes the table without its range check:
// for rms in [2^-60, 2^60] and |x| in [2^-31 rms, 2^5 rms], |x| lies in [2^-91, 2^65] and q = x inv
// within an ulp of x / rms in [2^-31, 2^5], inside div_by_rms's FMA range, and the quotient
// rounded to bf16 lies in [2^-31, 2^5], inside the table (2^-32 .. 2^6). A zero's quotient is the
// zero itself (the correction is formed as -(q rms - x), so -0 stays -0) and so is its SiLU. The
// bounds are rounded inwards to bf16 magnitudes; tiny nonzero values, denormals, inf and NaN (and
// any rms outside that range) take the per-value path. Both paths give the same bits; the
// branch-free one drops the per-value branches (41 instructions per value before, Nsight Compute;
// 0.208 -> 0.156 ms a 512-channel pass, session 18). Kept as the check compares them:
// lo_m1 = lo - 1 (above any 16-bit value when no chunk may take the path), hi_b = 0x7fff + hi.
struct SiluRowScale {
  float rms, inv;
  uint32_t lo_m1, hi_b;
};

__device__ __forceinline__ SiluRowScale silu_row_scale(float rms, float inv) {
  SiluRowScale s{rms, inv, 0x10000u, 0u};
  if (rms >= 0x1p-60f && rms <= 0x1p60f) {
    // The smallest bf16 magnitude >= 2^-31 rms and the largest <= 2^5 rms (both exact products).
    s.lo_m1 = ((__float_as_uint(rms * 0x1p-31f) + 0xffffu) >> 16) - 1u;
    s.hi_b = 0x7fffu + (__float_as_uint(rms * 0x1p5f) >> 16);
  }
  return s;
}

// The table entry of the bf16 bits `key`: silu_bf16_bits without its range check, a shared-memory
// load at `table` (a shared address). The index is clamped into the table so that a zero's key
// reads some entry rather than outside it (the caller replaces that value).
__device__ __forceinline__ uint32_t silu_table_entry(uint32_t key, uint32_t table) {
  const uint32_t index = min((key & 0x7fffu) + (key >> 15) * kSiluTableHalf - kSiluTableFirst,
                             kSiluTableSize - 1);
  uint16_t v;
  asm("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(table + 2 * index));
  return v;
}

// Per halfword of a word of two bf16 values: 0x8000 + m - 1 for a magnitude m > 0, 0x7fff for a
// zero (bit 15 is set before the subtraction, so no borrow crosses into the other half).
__device__ __forceinline__ uint32_t magnitude_minus_one(uint32_t w) {
  return (w | 0x80008000u) - 0x00010001u;
}

// o with each half whose bf16 value in y is a zero (of either sign) replaced by that zero.
__device__ __forceinline__ uint32_t keep_zeros(uint32_t o, uint32_t y) {
  const uint32_t zero_halves = ~magnitude_minus_one(y) & 0x80008000u;  // bit 15 of each zero half
  const uint32_t mask = (zero_halves >> 15) * 0xffffu;
  return (o & ~mask) | (y & mask);
}

// Chunk `c` (8 bf16 values) divided by rms, rounded to bf16 and through the SiLU table, stored
// at chunk c of y_row as one 16-byte vector. A chunk whose values are all zeros or of magnitudes
// in the row's [lo, hi] takes the branch-free path (see SiluRowScale), others the per-value one.
__device__ __forceinline__ void store_chunk_silu_table(void* y_row, int c,
                                                       const DimChunkBits<DType::BF16>& q,
                                                       const SiluRowScale& s,
                                                       const uint16_t* table) {
  const uint4& w = q.w[0];
  const uint32_t b0 = magnitude_minus_one(w.x), b1 = magnitude_minus_one(w.y),
                 b2 = magnitude_minus_one(w.z), b3 = magnitude_minus_one(w.w);
  // Zeros are the smallest halves of b and, flipped by bit 15, the largest: out of both extremes.
  constexpr uint32_t kFlip = 0x80008000u;
  const uint32_t mx = max_u16x2(max_u16x2(b0, b1), max_u16x2(b2, b3));
  const uint32_t mn = min_u16x2(min_u16x2(b0 ^ kFlip, b1 ^ kFlip), min_u16x2(b2 ^ kFlip, b3 ^ kFlip));
  uint32_t out[4];
  if (max(mx & 0xffffu, mx >> 16) <= s.hi_b && min(mn & 0xffffu, mn >> 16) >= s.lo_m1) {
    const uint32_t shared_table = static_cast<uint32_t>(__cvta_generic_to_shared(table));
    const auto quotient = [&](float x) {  // div_by_rms's FMAs, -0 kept
      const float qx = __fmul_rn(x, s.inv);
      return __fmaf_rn(-__fmaf_rn(qx, s.rms, -x), s.inv, qx);
    };
    uint32_t y[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;"
          : "=r"(y[j])
          : "f"(quotient(chunk_value(q, 2 * j + 1))), "f"(quotient(chunk_value(q, 2 * j))));
      out[j] = silu_table_entry(y[j] & 0xffffu, shared_table) |
               (silu_table_entry(y[j] >> 16, shared_table) << 16);
    }
    if ((b0 & b1 & b2 & b3 & kFlip) != kFlip) {  // a zero in the chunk: silu(+-0) = +-0
#pragma unroll
      for (int j = 0; j < 4; ++j) out[j] = keep_zeros(out[j], y[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float lo = div_by_rms(chunk_value(q, 2 * j), s.rms, s.inv);
      const float hi = div_by_rms(chunk_value(q, 2 * j + 1), s.rms, s.inv);
      uint32_t packed;  // both rounded in one cvt (NaN: out of the table, computed as before)
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
      out[j] = silu_bf16_bits(packed & 0xffffu, table) | (silu_bf16_bits(packed >> 16, table) << 16);
    }
  }
  reinterpret_cast<uint4*>(y_row)[c] = make_uint4(out[0], out[1], out[2], out[3]);
}

// x and y of dtype kDt, d a multiple of 8, 16-byte aligned rows: 16-byte loads and stores.
// K > 0: rows of at most 8 * 32 * K elements held in registers, lane g of a row's group of `lanes`
// lanes holding chunks g + lanes * k (k < K; lanes < 32 only when K is 1, for rows of at most 8
// lanes chunks, 32 / lanes rows per warp), the warp's next rows loaded before its current ones
// are summed; x is read once. K == 0: longer rows (lanes 32), read twice, the second time mostly
// from L2. kTable (kSilu on bf16, `table` the device's SiLU table): the block copies the table
// into shared memory first and looks every SiLU up there. kBias: a.pre_bias is added to every
// chunk as it is loaded (the lane's K bias chunks loaded once).
template <DType kDt, int K, bool kSilu, bool kTable, bool kBias, bool kResidual = false>
__global__ void __launch_bounds__(kDimRowsWarps * 32) rms_norm_dim_rows_vec_kernel(
    RowArgs a, int lanes, const uint16_t* __restrict__ table) {
  static_assert(!kTable || (kSilu && kDt == DType::BF16), "the SiLU table is for bf16 SiLU");
  static_assert(!kResidual || (kBias && K > 0), "the residual comes after a bias, rows in registers");
  using Chunk = DimChunkBits<kDt>;
  constexpr int64_t kBytes = kDt == DType::BF16 ? 2 : 4;
  __shared__ __align__(16) uint16_t shared_table[kTable ? kSiluTableSize : 8];
  if constexpr (kTable) {
    constexpr int kWords = kSiluTableSize * sizeof(uint16_t) / sizeof(uint4);
    static_assert(kSiluTableSize * sizeof(uint16_t) % sizeof(uint4) == 0);
    for (int i = threadIdx.x; i < kWords; i += blockDim.x)
      reinterpret_cast<uint4*>(shared_table)[i] = reinterpret_cast<const uint4*>(table)[i];
    __syncthreads();
  }
  // The row's scale as the chunk's store takes it (kTable: with the branch-free path's range).
  const auto row_scale = [](float rms) {
    const float inv = 1.f / rms;
    if constexpr (kTable) {
      return silu_row_scale(rms, inv);
    } else {
      return SiluRowScale{rms, inv, 0u, 0u};
    }
  };
  // The chunk's store: through the table, or dim_out per value.
  const auto store = [&](void* y_row, int c, const Chunk& q, const SiluRowScale& s) {
    if constexpr (kTable) {
      store_chunk_silu_table(y_row, c, q, s, shared_table);
    } else {
      store_chunk_over<kDt, kSilu>(y_row, c, q, s.rms, s.inv);
    }
  };
  const int lane = threadIdx.x & 31, g = lane & (lanes - 1), per_warp = 32 / lanes;
  const int chunks = static_cast<int>(a.d / kDimChunk);
  const char* x = static_cast<const char*>(a.x);
  char* y = static_cast<char*>(a.y);
  const int64_t step = static_cast<int64_t>(gridDim.x) * kDimRowsWarps * per_warp;
  // The warp's first row; the whole warp iterates together (the shuffles need every lane) and
  // lane group lane / lanes takes row r0 + lane / lanes, idle past the last row.
  const int64_t first =
      (static_cast<int64_t>(blockIdx.x) * kDimRowsWarps + threadIdx.x / 32) * per_warp;
  const char* bias = static_cast<const char*>(a.pre_bias);
  if constexpr (K == 0) {
    // Chunk c of a row as the norm sees it (with the bias added).
    const auto chunk = [&](const char* row, int c) {
      if constexpr (kBias) {
        return add_chunk_bias(load_chunk<kDt>(row, c), load_chunk<kDt>(bias, c));
      } else {
        return load_chunk<kDt>(row, c);
      }
    };
    for (int64_t r = first; r < a.rows; r += step) {
      const char* row = x + r * a.d * kBytes;
      double ss = 0.0;
#pragma unroll 4
      for (int c = lane; c < chunks; c += 32) ss = add_chunk_squares(ss, chunk(row, c));
      const SiluRowScale s = row_scale(dim_rms(dim_lanes_sum(ss, 32), a.d, a.eps));
      void* y_row = y + r * a.d * kBytes;
#pragma unroll 4
      for (int c = lane; c < chunks; c += 32) store(y_row, c, chunk(row, c), s);
    }
  } else {
    const int64_t sub = lane / lanes;
    Chunk bias_chunk[K];  // this lane's chunks of the bias, the same for every row
    if constexpr (kBias) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int c = g + lanes * k;
        bias_chunk[k] = c < chunks ? load_chunk<kDt>(bias, c) : Chunk{};
      }
    }
    const auto fetch_from = [&](const char* base, int64_t r0, Chunk(&q)[K]) {
      const int64_t r = r0 + sub;
      const char* row = base + r * a.d * kBytes;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int c = g + lanes * k;
        q[k] = r < a.rows && c < chunks ? load_chunk<kDt>(row, c) : Chunk{};  // zeros add nothing
      }
    };
    const char* residual = static_cast<const char*>(a.pre_residual);
    // kResidual: the residual's chunks of the row, loaded with x's.
    constexpr int KR = kResidual ? K : 1;
    const auto fetch = [&](int64_t r0, Chunk(&q)[K], Chunk(&rq)[KR]) {
      fetch_from(x, r0, q);
      if constexpr (kResidual) fetch_from(residual, r0, rq);
    };
    Chunk q[K], rq[KR];
    fetch(first, q, rq);
    for (int64_t r0 = first; r0 < a.rows; r0 += step) {
      Chunk next[K], rnext[KR];
      fetch(r0 + step, next, rnext);  // in flight while this row is worked on
      if constexpr (kBias) {
        // Past the row's end (or the last row) the chunk stays zero: it must add nothing.
        const bool live = r0 + sub < a.rows;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const int c = g + lanes * k;
          if (live && c < chunks) {
            q[k] = add_chunk_bias(q[k], bias_chunk[k]);
            if constexpr (kResidual) {
              // (x + bias) + residual, each sum rounded: the block's output, stored as formed.
              q[k] = add_chunk_bias(q[k], rq[k]);
              char* out_row = static_cast<char*>(a.x_out) + (r0 + sub) * a.d * kBytes;
              reinterpret_cast<uint4*>(out_row)[c] = q[k].w[0];
            }
          }
        }
      }
      double ss = 0.0;
#pragma unroll
      for (int k = 0; k < K; ++k) ss = add_chunk_squares(ss, q[k]);
      const SiluRowScale s = row_scale(dim_rms(dim_lanes_sum(ss, lanes), a.d, a.eps));
      const int64_t r = r0 + sub;
      void* y_row = y + r * a.d * kBytes;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int c = g + lanes * k;
        if (r < a.rows && c < chunks) store(y_row, c, q[k], s);
      }
#pragma unroll
      for (int k = 0; k < K; ++k) q[k] = next[k];
      if constexpr (kResidual) {
#pragma unroll
        for (int k = 0; k < K; ++k) rq[k] = rnext[k];
      }
    }
  }
}

constexpr int kDimRowsThreads = kDimRowsWarps * 32;

// A grid for a grid-stride row kernel over `warp_iterations` warp-sized steps: enough blocks to
// cover them, at most as many as fit on the device at once, so that every warp takes an equal
// share of the rows (the next one prefetched) and no partial second wave runs at low occupancy.
template <typename Kernel>
unsigned dim_rows_grid(Kernel kernel, int64_t warp_iterations, int dev) {
  const int per_sm = resident_blocks_per_sm(reinterpret_cast<const void*>(kernel), kDimRowsThreads, 0, dev);
  const int64_t resident = int64_t{per_sm} * multiprocessor_count(dev);
  const int64_t want = (warp_iterations + kDimRowsWarps - 1) / kDimRowsWarps;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(want, resident)));
}

template <DType kDt, int K, bool kSilu, bool kTable>
void launch_dim_rows_vec(const RowArgs& a, int lanes, const uint16_t* table, int dev,
                         cudaStream_t stream) {
  const int per_warp = 32 / lanes;
  const auto go = [&](auto kernel) {
    const unsigned grid = dim_rows_grid(kernel, (a.rows + per_warp - 1) / per_warp, dev);
    kernel<<<grid, kDimRowsThreads, 0, stream>>>(a, lanes, table);
  };
  // The pre-norm bias only with the SiLU (rms_norm_dim_silu's): fewer instantiations; the
  // residual after it only for bf16 rows held in registers (the VAE decoder's).
  if constexpr (kSilu && kDt == DType::BF16 && K > 0) {
    if (a.pre_residual != nullptr) {
      go(rms_norm_dim_rows_vec_kernel<kDt, K, true, kTable, true, true>);
      return;
    }
  }
  if (kSilu && a.pre_bias != nullptr) {
    go(rms_norm_dim_rows_vec_kernel<kDt, K, kSilu, kTable, kSilu>);
  } else {
    go(rms_norm_dim_rows_vec_kernel<kDt, K, kSilu, kTable, false>);
  }
}

template <int K, bool kSilu>
void launch_dim_rows_vec(const RowArgs& a, int lanes, int dev, cudaStream_t stream) {
  if (a.x_dtype == DType::BF16) {
    const uint16_t* table = kSilu ? silu_bf16_table(dev, stream) : nullptr;
    if (table != nullptr) {
      launch_dim_rows_vec<DType::BF16, K, kSilu, kSilu>(a, lanes, table, dev, stream);
    } else {
      launch_dim_rows_vec<DType::BF16, K, kSilu, false>(a, lanes, nullptr, dev, stream);
    }
  } else {
    launch_dim_rows_vec<DType::F32, K, kSilu, false>(a, lanes, nullptr, dev, stream);
  }
}

// rms_norm_dim's row kernels for a: the vector kernel when the rows allow it, else the scalar one.
// Whether rows of d values of dtype dt at x can be read by the vector kernel (16-byte chunks).
bool dim_rows_vec_input(int64_t d, DType dt, const void* x) {
  return d % kDimChunk == 0 && d / kDimChunk <= INT32_MAX && vec_dtype(dt) && aligned16(x);
}

// Whether the rows of a take the vector kernel.
bool dim_rows_vec_ok(const RowArgs& a) {
  return dim_rows_vec_input(a.d, a.x_dtype, a.x) && a.x_dtype == a.y_dtype && aligned16(a.y);
}

template <bool kSilu>
void launch_dim_rows(const RowArgs& a, int dev, cudaStream_t stream) {
  const bool vec = dim_rows_vec_ok(a);
  LTX_CHECK(a.pre_bias == nullptr || (vec && kSilu), "rms_norm_dim: a pre-norm bias needs the "
            "vector row kernel with the SiLU");
  LTX_CHECK(a.pre_residual == nullptr ||
                (a.pre_bias != nullptr && a.x_dtype == DType::BF16 && a.d <= kDimResidualMaxD),
            "rms_norm_dim: a pre-norm residual needs the bias and bf16 rows of at most ",
            kDimResidualMaxD, " values");
  if (!vec) {
    const auto kernel = rms_norm_dim_rows_kernel<kSilu>;
    kernel<<<dim_rows_grid(kernel, a.rows, dev), kDimRowsThreads, 0, stream>>>(a);
    return;
  }
  const int64_t chunks = a.d / kDimChunk;
  int lanes = 1;
  while (lanes < 32 && lanes < chunks) lanes *= 2;
  if (chunks <= 32) {
    launch_dim_rows_vec<1, kSilu>(a, lanes, dev, stream);
  } else if (chunks <= 64) {
    launch_dim_rows_vec<2, kSilu>(a, lanes, dev, stream);
  } else if (chunks <= 128) {
    launch_dim_rows_vec<4, kSilu>(a, lanes, dev, stream);
  } else {
    launch_dim_rows_vec<0, kSilu>(a, lanes, dev, stream);
  }
}

// GroupNorm: one block per (n, group), whose channels x positions are one contiguous run of
// a.d elements in [N, C, *spatial]; `hw` positions per channel, `cpg` channels per group. The
// runs can hold millions of elements, so the partial sums are double here.
__global__ void group_norm_kernel(RowArgs a, int64_t hw, int64_t cpg, int64_t groups) {
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const int64_t base = r * a.d;
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) s += load_f32(a.x, a.x_dtype, base + i);
    const double mean_d = block_sum(s) / static_cast<double>(a.d);
    double ssd = 0.0;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      const double dv = load_f32(a.x, a.x_dtype, base + i) - mean_d;
      ssd += dv * dv;
    }
    ssd = block_sum(ssd);
    const float mean = static_cast<float>(mean_d);
    const float rs = static_cast<float>(1.0 / sqrt(ssd / static_cast<double>(a.d) + a.eps));
    const bool affine = a.w != nullptr || a.b != nullptr;
    const int64_t c0 = (r % groups) * cpg;
    for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
      float y = mul_rn(add_rn(load_f32(a.x, a.x_dtype, base + i), -mean), rs);
      if (affine) {
        const int64_t c = c0 + i / hw;
        const float wc = a.w != nullptr ? load_f32(a.w, a.w_dtype, c) : 1.f;
        const float bc = a.b != nullptr ? load_f32(a.b, a.b_dtype, c) : 0.f;
        y = add_rn(mul_rn(y, wc), bc);
      }
      store_f32(a.y, a.y_dtype, base + i, y);
    }
  }
}

// Arguments for x (made contiguous into *xc), the optional affine tensors and a new output.
RowArgs row_args(const Tensor& x, Tensor* xc, const Tensor& weight, const Tensor& bias,
                 Tensor* keep_w, Tensor* keep_b, const Tensor& out, double eps,
                 bool keep_layout = false) {
  *xc = keep_layout ? x : x.contiguous();
  *keep_w = weight.defined() ? weight.contiguous() : Tensor();
  *keep_b = bias.defined() ? bias.contiguous() : Tensor();
  RowArgs a{};
  a.x = xc->raw_data();
  a.x_dtype = xc->dtype();
  a.w = keep_w->defined() ? keep_w->raw_data() : nullptr;
  a.w_dtype = keep_w->defined() ? keep_w->dtype() : DType::F32;
  a.b = keep_b->defined() ? keep_b->raw_data() : nullptr;
  a.b_dtype = keep_b->defined() ? keep_b->dtype() : DType::F32;
  a.y = out.raw_data();
  a.y_dtype = out.dtype();
  a.eps = eps;
  return a;
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 20));
}

// rms_norm's and rms_norm_modulate's launch: the kept contiguous inputs, the output, the arguments.
struct RmsCall {
  Tensor xc, wc, bc, out;
  ops::Summed scale, shift;  // the modulation operands (normalize_runs), alive until the launch
  RowArgs a{};
  ModArgs m;
  bool modulate = false;
  bool segmented() const { return a.seg > 0; }  // x and out are segmented views (vector kernels only)
};

// A view of dense rows in segments (RowArgs::seg): unit stride along the last dim, dense rows
// along dim -2, and the leading dims collapsing into one index of stride *outer.
bool row_segments(const Tensor& t, int64_t* seg, int64_t* outer) {
  const int n = t.dim();
  if (n < 3) return false;
  const Strides& st = t.strides();
  if (st[n - 1] != 1 || st[n - 2] != t.size(n - 1)) return false;
  for (int i = 0; i + 3 < n; ++i)
    if (st[i] != st[i + 1] * t.size(i + 1)) return false;
  *seg = t.size(n - 2);
  *outer = st[n - 3];
  return true;
}

// Fewer row-index divisions for the same offsets: x's lead dims coalesced (the shared
// `coalesce`, with the row index itself as the first operand so that the dims keep their logical
// order; broadcast dims merge with each other), then the outermost dims that move no operand
// dropped (nothing inside depends on them). A modulation broadcast over all of x's rows
// ([B = 1, 1, .., C]) needs no division at all.
void compact_lead_dims(ModArgs* m) {
  Shape shape;
  std::array<Strides, kModOperands + 1> strides;
  int64_t row = 1;
  std::vector<int64_t> row_stride(static_cast<size_t>(m->lead));
  for (int d = m->lead - 1; d >= 0; --d) {
    row_stride[static_cast<size_t>(d)] = row;
    row *= m->size[d];
  }
  for (int d = 0; d < m->lead; ++d) {
    shape.push_back(m->size[d]);
    strides[0].push_back(row_stride[static_cast<size_t>(d)]);
    for (int k = 0; k < kModOperands; ++k)
      strides[k + 1].push_back(m->p[k] != nullptr ? m->stride[k][d] : 0);
  }
  const StridedLoop<kModOperands + 1> loop = coalesce<kModOperands + 1>(shape, strides);
  const auto moves = [&](int d) {
    for (int k = 1; k <= kModOperands; ++k)
      if (loop.stride[k][d] != 0) return true;
    return false;
  };
  int drop = 0;
  while (drop < loop.ndim && !moves(drop)) ++drop;
  m->lead = loop.ndim - drop;
  for (int d = 0; d < kMaxDims; ++d) {
    const bool kept = d < m->lead;
    m->size[d] = kept ? loop.size[d + drop] : 0;
    for (int k = 0; k < kModOperands; ++k) m->stride[k][d] = kept ? loop.stride[k + 1][d + drop] : 0;
  }
}

// Whether t varies along x's dim -2 (its dims align with x's from the right).
bool varies_along_rows(const Tensor& t) { return t.defined() && t.dim() >= 2 && t.size(-2) > 1; }

// The conditions of ModArgs' run map on the operands of one ModArgs: those with runs share them
// (at most kMaxModRuns), and their first summands and the operands without runs broadcast along
// x's dim -2. Otherwise each operand with runs is materialised per token (Summed::value): the
// caller keeps the returned operands alive until its launch.
void normalize_runs(const Tensor& x, std::initializer_list<ops::Summed*> operands) {
  std::vector<int64_t> runs;
  bool ok = x.dim() >= 2;
  for (const ops::Summed* s : operands) {
    if (!s->has_runs()) {
      ok = ok && !varies_along_rows(s->a) && !varies_along_rows(s->b);
      continue;
    }
    if (runs.empty()) runs = s->run_ends;
    ok = ok && s->run_ends == runs && !varies_along_rows(s->a);
  }
  if (runs.empty() || (ok && runs.size() <= static_cast<size_t>(kMaxModRuns) &&
                       runs.back() == x.size(-2)))
    return;
  for (ops::Summed* s : operands)
    if (s->has_runs()) *s = ops::Summed(s->value());
}

// The modulation operands scale / shift (each possibly a Summed pair, normalize_runs applied) of
// x's `rows` rows.
ModArgs mod_args(const Tensor& x, const ops::Summed& scale, const ops::Summed& shift, int64_t rows) {
  ModArgs m;
  m.lead = x.dim() - 1;
  for (int d = 0; d < m.lead; ++d) m.size[d] = x.size(d);
  const ops::Summed* runs = scale.has_runs() ? &scale : shift.has_runs() ? &shift : nullptr;
  // The second summands with runs hold one row per run along dim -2.
  Shape run_shape = x.shape();
  if (runs != nullptr)
    run_shape[run_shape.size() - 2] = static_cast<int64_t>(runs->run_ends.size());
  const Tensor* operands[kModOperands] = {&scale.a, &shift.a, &scale.b, &shift.b};
  const bool per_run[kModOperands] = {false, false, scale.has_runs(), shift.has_runs()};
  for (int k = 0; k < kModOperands; ++k) {
    const Tensor& t = *operands[k];
    if (!t.defined()) continue;
    const Strides st = broadcast_strides(t, per_run[k] ? run_shape : x.shape());
    for (int d = 0; d < m.lead; ++d) m.stride[k][d] = st[d];
    m.last[k] = st[x.dim() - 1];
    m.p[k] = t.raw_data();
    m.dtype[k] = t.dtype();
  }
  m.bf16_sum[kScale] = scale.dtype() == DType::BF16;
  m.bf16_sum[kShift] = shift.dtype() == DType::BF16;
  if (runs != nullptr) {
    // x's dims stay as they are: the run dim keeps its place (no coalescing across it).
    m.runs = static_cast<int>(runs->run_ends.size());
    m.run_dim = m.lead - 1;
    for (int r = 0; r < m.runs; ++r) m.run_end[r] = runs->run_ends[static_cast<size_t>(r)];
  } else {
    compact_lead_dims(&m);
  }
  m.fast = fast_div_fits(rows);
  if (m.fast)
    for (int d = 0; d < m.lead; ++d) m.fsize[d] = FastDivU32(static_cast<uint32_t>(m.size[d]));
  // The keys: mixed radix over the dims an operand moves along (runs on the run dim); at most
  // the row count, so below 2^31 when `fast`.
  uint64_t radix = 1;
  for (int d = m.lead - 1; d >= 0; --d) {
    bool moves = false;
    for (int k = 0; k < kModOperands; ++k) moves = moves || (m.p[k] != nullptr && m.stride[k][d] != 0);
    m.key_mul[d] = moves ? static_cast<uint32_t>(radix) : 0;
    if (moves) radix *= static_cast<uint64_t>(d == m.run_dim ? m.runs : m.size[d]);
  }
  return m;
}

// Sets m.cache (see ModArgs) for x's rows of d values when each operand's values are bf16 (a
// plain bf16 operand or a sum stored as bf16) and consecutive rows share them: all rows (no lead
// dim left after compact_lead_dims), the innermost lead dim broadcast, or mapped by runs. Rows of
// at most 4096 values only: the kernels' cached values (up to 3 operands, 6 d bytes; 5 and 10 d
// with gated_add_rms_norm_modulate2's second modulation, whose launch asks for more than the
// default 48 KiB) and the staged row (up to 4 d bytes) then fit in a block's shared memory; and
// fewer than 2^31 rows (`fast`: 32-bit row keys). The vector kernels' loads (mod_vec_ok) are
// assumed.
void set_row_cache(ModArgs* m, int64_t d) {
  m->cache = false;
  if (d > 4096 || !m->fast) return;
  for (int j : {kScale, kShift})
    if (m->p[j] != nullptr && !m->bf16_sum[j]) return;
  if (m->lead == 0 || m->runs > 0) {
    m->cache = true;
    return;
  }
  for (int k = 0; k < kModOperands; ++k)
    if (m->p[k] != nullptr && m->stride[k][m->lead - 1] != 0) return;
  m->cache = m->size[m->lead - 1] > 1;
}

// Whether every row's modulation vectors can be loaded as 16-byte vectors: unit stride along d,
// row offsets multiples of kVec, f32 / bf16, aligned.
bool mod_vec_ok(const ModArgs& m) {
  for (int k = 0; k < kModOperands; ++k) {
    if (m.p[k] == nullptr) continue;
    if (m.last[k] != 1 || !vec_dtype(m.dtype[k]) || !aligned16(m.p[k])) return false;
    for (int d = 0; d < m.lead; ++d)
      if (m.stride[k][d] % kVec != 0) return false;
  }
  return true;
}

// Without scale/shift: rms_norm(x, weight); with them: rms_norm_modulate(x, scale, shift). With
// `into` (x's shape and the result dtype) the result goes there; x and `into` are read / written
// in place when both are contiguous or both segmented views (RmsCall::segmented), else x is
// copied and `into` must be contiguous.
RmsCall rms_call(const Tensor& x, const Tensor& weight, const ops::Summed& scale,
                 const ops::Summed& shift, double eps, const Tensor& into = Tensor()) {
  RmsCall c;
  c.modulate = scale.a.defined();
  DType out_dtype = x.dtype();  // rms_norm's; modulate's is bf16 only when all its operands are
  if (c.modulate && (scale.dtype() != DType::BF16 || shift.dtype() != DType::BF16))
    out_dtype = DType::F32;
  c.out = into.defined() ? into : Tensor::empty(x.shape(), out_dtype, x.device());
  if (c.out.numel() == 0) return c;
  int64_t xs = 0, xo = 0, ys = 0, yo = 0;
  const bool segmented = into.defined() && !(x.is_contiguous() && into.is_contiguous()) &&
                         row_segments(x, &xs, &xo) && row_segments(into, &ys, &yo) && xs == ys;
  c.a = row_args(x, &c.xc, weight, Tensor(), &c.wc, &c.bc, c.out, eps, segmented);
  c.a.d = x.size(-1);
  c.a.rows = x.numel() / c.a.d;
  if (segmented) {
    c.a.seg = xs;
    c.a.x_outer = xo;
    c.a.y_outer = yo;
    c.a.seg_fast = fast_div_fits(c.a.rows);
    if (c.a.seg_fast) c.a.fseg = FastDivU32(static_cast<uint32_t>(xs));
  }
  if (c.modulate) {
    c.scale = scale;
    c.shift = shift;
    normalize_runs(x, {&c.scale, &c.shift});
    c.m = mod_args(x, c.scale, c.shift, c.a.rows);
  }
  return c;
}

// Whether rms_norm_vec_kernel can run the call (see there).
bool rows_vec_ok(const RmsCall& c) {
  const RowArgs& a = c.a;
  if (c.out.numel() == 0 || !vec_dtype(a.x_dtype) || !vec_dtype(a.y_dtype) || a.d % kVec != 0 ||
      a.d * static_cast<int64_t>(dtype_size(a.x_dtype)) > kRowVecMaxBytes || !aligned16(a.x) ||
      !aligned16(a.y))
    return false;
  if (a.w != nullptr && (!vec_dtype(a.w_dtype) || !aligned16(a.w))) return false;
  if (a.seg > 0 && (a.x_outer % kVec != 0 || a.y_outer % kVec != 0)) return false;
  return !c.modulate || mod_vec_ok(c.m);
}

Tensor run_rms(const RmsCall& c) {
  if (c.out.numel() == 0) return c.out;
  const int dev = c.out.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev).handle();
  const unsigned blocks = row_blocks(c.a.rows);
  const int threads = row_threads(c.a.d);
  if (rows_vec_ok(c) && c.a.d == 256 && c.a.x_dtype == DType::BF16) {
    const unsigned grid = grid_for(c.a.rows, kWarpRowWarps, dev);  // a warp per row
    if (c.modulate) {
      rms_norm_row256_kernel<true><<<grid, kWarpRowWarps * 32, 0, stream>>>(c.a, c.m);
    } else {
      rms_norm_row256_kernel<false><<<grid, kWarpRowWarps * 32, 0, stream>>>(c.a, c.m);
    }
  } else if (rows_vec_ok(c) && c.a.d <= kWarpRowMaxD) {
    const size_t smem = static_cast<size_t>(kWarpRowWarps) * kWarpRowMaxD * 4;
    const unsigned grid = grid_for(c.a.rows, kWarpRowWarps, dev);  // a warp per row
    if (c.modulate) {
      rms_norm_warp_kernel<true><<<grid, kWarpRowWarps * 32, smem, stream>>>(c.a, c.m);
    } else {
      rms_norm_warp_kernel<false><<<grid, kWarpRowWarps * 32, smem, stream>>>(c.a, c.m);
    }
  } else if (rows_vec_ok(c)) {
    const size_t smem = static_cast<size_t>(c.a.d) * dtype_size(c.a.x_dtype);
    const auto launch = [&](auto bf16, auto weight) {
      constexpr bool kBf = decltype(bf16)::value, kW = decltype(weight)::value;
      if (c.modulate) {
        ModArgs m = c.m;
        // The per-run values cached after the row: 2 d bf16.
        set_row_cache(&m, c.a.d);
        const size_t cached_smem = smem + (m.cache ? static_cast<size_t>(c.a.d) * 4 : 0);
        const auto go = [&](auto kernel, size_t bytes) {
          allow_dynamic_smem(reinterpret_cast<const void*>(kernel), bytes);
          const unsigned grid = m.cache ? resident_grid(kernel, threads, bytes, c.a.rows, dev) : blocks;
          kernel<<<grid, threads, bytes, stream>>>(c.a, m);
        };
        // bf16 rows on the cached path (resident blocks taking many rows): the next row staged
        // while the block works on the current one, in a second buffer.
        if (kBf && m.cache) {
          go(rms_norm_vec_kernel<true, kBf, kW, true>, cached_smem + smem);
        } else {
          go(rms_norm_vec_kernel<true, kBf, kW>, cached_smem);
        }
      } else {
        rms_norm_vec_kernel<false, kBf, kW><<<blocks, threads, smem, stream>>>(c.a, c.m);
      }
    };
    const bool bf16 = c.a.x_dtype == DType::BF16 && c.a.y_dtype == DType::BF16;
    if (bf16 && c.a.w == nullptr) {
      launch(std::true_type{}, std::false_type{});
    } else if (bf16) {
      launch(std::true_type{}, std::true_type{});
    } else {
      launch(std::false_type{}, std::true_type{});
    }
  } else if (c.modulate) {
    rms_norm_modulate_kernel<<<blocks, threads, 0, stream>>>(c.a, c.m);
  } else {
    rms_norm_kernel<<<blocks, threads, 0, stream>>>(c.a);
  }
  LTX_CUDA_CHECK_LAUNCH();
  return c.out;
}

template <typename Kernel>
Tensor run_rows(Kernel kernel, const Tensor& x, const Tensor& weight, const Tensor& bias,
                double eps) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  Tensor xc, wc, bc;
  RowArgs a = row_args(x, &xc, weight, bias, &wc, &bc, out, eps);
  a.d = x.size(-1);
  a.rows = x.numel() / a.d;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  kernel<<<row_blocks(a.rows), row_threads(a.d), 0, current_stream(dev).handle()>>>(a);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return run_rms(rms_call(x, weight, Tensor(), Tensor(), eps));
}

bool rms_norm_vectorised(const Tensor& x, const Tensor& weight) {
  return rows_vec_ok(rms_call(x, weight, Tensor(), Tensor(), 0.0));
}

bool rms_norm_modulate_vectorised(const Tensor& x, const ops::Summed& scale,
                                  const ops::Summed& shift) {
  return rows_vec_ok(rms_call(x, Tensor(), scale, shift, 0.0));
}

namespace {

// The fused residual + norm call's arguments; ok false when the kernel does not take them (see
// norm.h).
struct ResidualNormCall {
  bool ok = false;
  RmsCall c;  // the norm of x_next: a.x is x (read), c.out is h
  ModArgs g;  // the gate in the kScale / kScale2 slots
  ops::Summed gate;  // normalize_runs applied, alive until the launch
};
// h: where the norm goes (bf16, x's shape), or x itself to only ask whether the call applies (the
// same verdict: a fresh h is aligned like x must be; nothing is allocated).
ResidualNormCall residual_norm_call(const Tensor& x, const Tensor& y, const ops::Summed& gate,
                                    const ops::Summed& scale, const ops::Summed& shift, double eps,
                                    const Tensor& h) {
  ResidualNormCall r;
  if (!x.defined() || !y.defined() || !gate.a.defined() || !scale.a.defined() ||
      !shift.a.defined() || !x.device().is_cuda() || x.dim() < 1 || x.numel() == 0)
    return r;
  // bf16 on x's device; x and y contiguous of one shape, the rest broadcasting to it.
  for (const Tensor* t : {&x, &y, &gate.a, &gate.b, &scale.a, &scale.b, &shift.a, &shift.b})
    if (t->defined() && (t->dtype() != DType::BF16 || t->device() != x.device()))
      return r;
  for (const ops::Summed* s : {&gate, &scale, &shift})
    if (!broadcasts_to(s->check("gated_add_rms_norm_modulate", "operand"), x.shape())) return r;
  if (!x.is_contiguous() || !y.is_contiguous() || y.shape() != x.shape()) return r;
  r.c = rms_call(x, Tensor(), scale, shift, eps, h);
  if (!rows_vec_ok(r.c) || !aligned16(y.raw_data())) return r;
  r.gate = gate;
  normalize_runs(x, {&r.gate});
  r.g = mod_args(x, r.gate, r.gate, r.c.a.rows);
  r.g.p[kShift] = r.g.p[kShift2] = nullptr;  // the gate uses the scale slots only
  r.ok = mod_vec_ok(r.g);
  return r;
}

}  // namespace

bool gated_add_rms_norm_modulate_fusable(const Tensor& x, const Tensor& y, const ops::Summed& gate,
                                         const ops::Summed& scale, const ops::Summed& shift) {
  return residual_norm_call(x, y, gate, scale, shift, 0.0, x).ok;
}

namespace {

// The fused residual + norm launch, with a second modulation when m2 is given (h2 its output).
void launch_residual_norm(const ResidualNormCall& r, const Tensor& y, const Tensor& x_next,
                          const ModArgs* m2_in, const Tensor& h2, int dev) {
  DeviceGuard guard(dev);
  ModArgs m = r.c.m, g = r.g, m2 = m2_in != nullptr ? *m2_in : ModArgs{};
  // The row's scale, shift and gate (and the second scale and shift) cached after it as bf16 (6 d
  // or 10 d bytes) when they all share their runs.
  set_row_cache(&m, r.c.a.d);
  set_row_cache(&g, r.c.a.d);
  if (m2_in != nullptr) set_row_cache(&m2, r.c.a.d);
  if (!m.cache || !g.cache || (m2_in != nullptr && !m2.cache)) m.cache = g.cache = m2.cache = false;
  // The next row's x and y prefetched (kPrefetch) where the grid is resident (the cached path: each
  // block takes many rows).
  const bool prefetch = m.cache;
  const size_t smem = static_cast<size_t>(
      r.c.a.d * residual_norm_smem_per_element(m.cache, m2_in != nullptr, prefetch));
  const int threads = row_threads(r.c.a.d);
  const auto go = [&](auto kernel) {
    // Rows of 4096 with two cached modulations take 48 KiB (64 KiB with the prefetch): more than a
    // launch gets by default.
    allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);
    const unsigned grid = m.cache ? resident_grid(kernel, threads, smem, r.c.a.rows, dev)
                                  : row_blocks(r.c.a.rows);
    kernel<<<grid, threads, smem, current_stream(dev).handle()>>>(
        r.c.a, m, g, y.raw_data(), x_next.raw_data(), m2, h2.defined() ? h2.raw_data() : nullptr);
  };
  if (m2_in != nullptr) {
    prefetch ? go(gated_add_rms_norm_modulate_kernel<true, true>)
             : go(gated_add_rms_norm_modulate_kernel<true, false>);
  } else {
    prefetch ? go(gated_add_rms_norm_modulate_kernel<false, true>)
             : go(gated_add_rms_norm_modulate_kernel<false, false>);
  }
  LTX_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gated_add_rms_norm_modulate(const Tensor& x, const Tensor& y, const ops::Summed& gate,
                                 const ops::Summed& scale, const ops::Summed& shift, double eps,
                                 Tensor* x_next, Tensor* h) {
  const ResidualNormCall r = residual_norm_call(
      x, y, gate, scale, shift, eps, Tensor::empty(x.shape(), DType::BF16, x.device()));
  LTX_CHECK(r.ok, "cuda::gated_add_rms_norm_modulate: arguments the fused kernel does not take (x ",
            x.describe(), ", y ", y.describe(), "); check gated_add_rms_norm_modulate_fusable first");
  *x_next = Tensor::empty(x.shape(), DType::BF16, x.device());
  *h = r.c.out;
  launch_residual_norm(r, y, *x_next, nullptr, Tensor(), x.device().index);
}

bool gated_add_rms_norm_modulate2_fusable(const Tensor& x, const Tensor& y, const ops::Summed& gate,
                                          const ops::Summed& scale, const ops::Summed& shift,
                                          const ops::Summed& scale2, const ops::Summed& shift2) {
  return gated_add_rms_norm_modulate_fusable(x, y, gate, scale, shift) &&
         gated_add_rms_norm_modulate_fusable(x, y, gate, scale2, shift2);
}

void gated_add_rms_norm_modulate2(const Tensor& x, const Tensor& y, const ops::Summed& gate,
                                  const ops::Summed& scale, const ops::Summed& shift,
                                  const ops::Summed& scale2, const ops::Summed& shift2, double eps,
                                  Tensor* x_next, Tensor* h, Tensor* h2) {
  const ResidualNormCall r = residual_norm_call(
      x, y, gate, scale, shift, eps, Tensor::empty(x.shape(), DType::BF16, x.device()));
  const ResidualNormCall r2 = residual_norm_call(
      x, y, gate, scale2, shift2, eps, Tensor::empty(x.shape(), DType::BF16, x.device()));
  LTX_CHECK(r.ok && r2.ok, "cuda::gated_add_rms_norm_modulate2: arguments the fused kernel does "
            "not take (x ", x.describe(), ", y ", y.describe(),
            "); check gated_add_rms_norm_modulate2_fusable first");
  *x_next = Tensor::empty(x.shape(), DType::BF16, x.device());
  *h = r.c.out;
  *h2 = r2.c.out;
  launch_residual_norm(r, y, *x_next, &r2.c.m, *h2, x.device().index);
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  return run_rows(layer_norm_kernel, x, weight, bias, eps);
}

Tensor rms_norm_modulate(const Tensor& x, const ops::Summed& scale, const ops::Summed& shift,
                         double eps, const Tensor& weight) {
  return run_rms(rms_call(x, weight, scale, shift, eps));
}

void rms_norm_modulate_into(const Tensor& out, const Tensor& x, const Tensor& scale,
                            const Tensor& shift, double eps, const Tensor& weight) {
  const RmsCall c = rms_call(x, weight, scale, shift, eps, out);
  if (c.out.numel() == 0) return;
  if ((c.segmented() && rows_vec_ok(c)) || (!c.segmented() && out.is_contiguous())) {
    (void)run_rms(c);
    return;
  }
  out.copy_from(rms_norm_modulate(x, scale, shift, eps, weight));
}

bool rms_norm_dim_rows_layout(const Tensor& x, int dim) {
  if (x.dim() < 2 || x.size(dim) < 2 || x.stride(dim) != 1 || x.is_contiguous()) return false;
  for (int d = 0; d < x.dim(); ++d)
    if (d != dim && x.size(d) > 1 && x.stride(d) <= 1) return false;  // dim must be innermost
  return true;
}

bool rms_norm_dim_bias_fuses(const Tensor& x, int dim, const Tensor& bias) {
  // The vector row kernel's conditions on dense channels-last rows (the output it writes is
  // allocated in x's dtype, aligned) and a dense aligned bias of x's dtype.
  return rms_norm_dim_rows_layout(x, dim) && x.is_dense() &&
         dim_rows_vec_input(x.size(dim), x.dtype(), x.raw_data()) && bias.is_contiguous() &&
         bias.dtype() == x.dtype() && bias.numel() == x.size(dim) && aligned16(bias.raw_data());
}

bool rms_norm_dim_residual_fuses(const Tensor& x, int dim, const Tensor& bias,
                                 const Tensor& residual) {
  // The bias's conditions, bf16 rows held in registers, and a residual laid out as x (dense, the
  // same strides: its rows line up with x's), aligned, not overlapping x.
  if (!rms_norm_dim_bias_fuses(x, dim, bias) || x.dtype() != DType::BF16 ||
      x.size(dim) > kDimResidualMaxD || residual.dtype() != x.dtype() ||
      residual.device() != x.device() || residual.shape() != x.shape() ||
      residual.strides() != x.strides() || !aligned16(residual.raw_data()))
    return false;
  const auto* xb = static_cast<const char*>(x.raw_data());
  const auto* rb = static_cast<const char*>(residual.raw_data());
  const size_t bytes = static_cast<size_t>(x.numel()) * dtype_size(x.dtype());
  return rb + bytes <= xb || xb + bytes <= rb;
}

namespace {

// The row kernels' arguments for rows of d dense values of x (out laid out as x).
RowArgs dim_row_args(const Tensor& x, const Tensor& out, int64_t d, double eps) {
  RowArgs a{};
  a.x = x.raw_data();
  a.x_dtype = x.dtype();
  a.y = out.raw_data();
  a.y_dtype = out.dtype();
  a.eps = eps;
  a.d = d;
  a.rows = x.numel() / d;
  return a;
}

}  // namespace

Tensor rms_norm_dim_silu_residual_(const Tensor& x, int dim, double eps, const Tensor& bias,
                                   const Tensor& residual) {
  LTX_CHECK(rms_norm_dim_residual_fuses(x, dim, bias, residual),
            "rms_norm_dim_silu_residual_ (CUDA): x ", x.describe(), ", bias ", bias.describe(),
            " and residual ", residual.describe(), " do not fuse; check rms_norm_dim_residual_fuses");
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  Tensor out = Tensor::empty_in_order(x.shape(), x.dim_order(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  RowArgs a = dim_row_args(x, out, x.size(dim), eps);
  a.pre_bias = bias.raw_data();
  a.pre_residual = residual.raw_data();
  a.x_out = x.raw_data();
  launch_dim_rows<true>(a, dev, current_stream(dev).handle());
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

Tensor rms_norm_dim(const Tensor& x, int dim, double eps, bool silu, const Tensor& pre_bias) {
  LTX_CHECK(!pre_bias.defined() || (silu && rms_norm_dim_bias_fuses(x, dim, pre_bias)),
            "rms_norm_dim (CUDA): the pre-norm bias ", pre_bias.describe(), " does not fuse for ",
            x.describe(), "; ops::rms_norm_dim_silu adds it first then");
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t stream = current_stream(dev).handle();
  // Rows of x.size(dim) contiguous elements: dim innermost in memory with stride 1 in a permuted
  // layout (a channels-last activation, the output in x's layout; a non-dense view of such a
  // tensor, frames narrowed out of a batch, is made dense first), or dim the last of x's
  // non-trivial dims (x made contiguous). Same order of sums as the column kernel, same bits.
  const Split3 s = x.dim() == 0 ? Split3{} : split3(x.shape(), dim, dim);
  Tensor xd, out;
  if (rms_norm_dim_rows_layout(x, dim)) {
    const std::vector<int64_t> order = x.dim_order();
    xd = x.contiguous_in_order(order);
    out = Tensor::empty_in_order(x.shape(), order, x.dtype(), x.device());
  } else if (x.dim() > 0 && s.b == 1) {
    xd = x.contiguous();
    out = Tensor::empty(x.shape(), x.dtype(), x.device());
  }
  if (xd.defined()) {
    if (out.numel() == 0) return out;
    RowArgs a = dim_row_args(xd, out, x.size(dim), eps);
    if (pre_bias.defined()) a.pre_bias = pre_bias.raw_data();
    (silu ? launch_dim_rows<true> : launch_dim_rows<false>)(a, dev, stream);
    LTX_CUDA_CHECK_LAUNCH();
    return out;
  }
  out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  Tensor xc, wc, bc;
  RowArgs a = row_args(x, &xc, Tensor(), Tensor(), &wc, &bc, out, eps);
  a.d = s.r;
  constexpr int kThreads = 256;
  const auto kernel = silu ? rms_norm_dim_kernel<true> : rms_norm_dim_kernel<false>;
  kernel<<<grid_for(s.a * s.b, kThreads, dev), kThreads, 0, stream>>>(a, s.a, s.b);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const int64_t n = x.size(0), c = x.size(1), hw = x.numel() / (n * c), cpg = c / num_groups;
  Tensor xc, wc, bc;
  RowArgs a = row_args(x, &xc, weight, bias, &wc, &bc, out, eps);
  a.rows = n * num_groups;
  a.d = cpg * hw;
  const int dev = x.device().index;
  DeviceGuard guard(dev);
  group_norm_kernel<<<row_blocks(a.rows), 256, 0, current_stream(dev).handle()>>>(a, hw, cpg,
                                                                                num_groups);
  LTX_CUDA_CHECK_LAUNCH();
  return out;
}

}  // namespace ltx::cuda
