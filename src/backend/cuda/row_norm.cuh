#pragma once
// The row-norm family's shared pieces, used by norm.cu (rms_norm, rms_norm_modulate, layer_norm,
// group_norm), residual_norm.cu (the gated residual add fused with the next AdaLN norm) and
// pixel_norm.cu (PixelNorm): the kernels' row arguments (RowArgs), the AdaLN modulation operands
// (ModArgs) and their device-side reads, the vector kernels' per-chunk normalise + modulate + store
// (rms_store_chunk, bit-identical across the kernels that share it), and the host calls that build
// the arguments (defined in norm.cu).
#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/fast_div.cuh"
#include "backend/cuda/rms_row.cuh"
#include "backend/common/scalar_math.h"
#include "core/tensor.h"
#include "op_types/summed.h"

namespace ltx::cuda::row_norm {

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

// The operands of rms_norm_modulate's modulation: scale and shift, and the second summands of
// the ones given as an ops::Summed (null when not summed).
enum ModOperand : int { kScale, kShift, kScale2, kShift2, kModOperands };

// The most runs ModArgs maps (ops::Summed::run_ends).
inline constexpr int kMaxModRuns = static_cast<int>(ops::kMaxSummedRuns);

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
inline constexpr uint32_t kNoRowKey = 0xFFFFFFFFu;

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

// Arguments for x (made contiguous into *xc), the optional affine tensors and a new output.
inline RowArgs row_args(const Tensor& x, Tensor* xc, const Tensor& weight, const Tensor& bias,
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

// A block per row, at most 2^20 blocks (the kernels stride over the rest).
inline unsigned row_blocks(int64_t rows) {
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

// Host side (norm.cu): the calls that build the arguments above.

// The conditions of ModArgs' run map on the operands of one ModArgs: those with runs share them
// (at most kMaxModRuns), and their first summands and the operands without runs broadcast along
// x's dim -2. Otherwise each operand with runs is materialised per token (materialize): the
// caller keeps the returned operands alive until its launch.
void normalize_runs(const Tensor& x, std::initializer_list<ops::Summed*> operands);

// The modulation operands scale / shift (each possibly a Summed pair, normalize_runs applied) of
// x's `rows` rows.
ModArgs mod_args(const Tensor& x, const ops::Summed& scale, const ops::Summed& shift, int64_t rows);

// Sets m.cache (see ModArgs) for x's rows of d values when each operand's values are bf16 (a
// plain bf16 operand or a sum stored as bf16) and consecutive rows share them: all rows (no lead
// dim left after compact_lead_dims), the innermost lead dim broadcast, or mapped by runs. Rows of
// at most 4096 values only: the kernels' cached values (up to 3 operands, 6 d bytes; 5 and 10 d
// with gated_add_rms_norm_modulate2's second modulation, whose launch asks for more than the
// default 48 KiB) and the staged row (up to 4 d bytes) then fit in a block's shared memory; and
// fewer than 2^31 rows (`fast`: 32-bit row keys). The vector kernels' loads (mod_vec_ok) are
// assumed.
void set_row_cache(ModArgs* m, int64_t d);

// Whether every row's modulation vectors can be loaded as 16-byte vectors: unit stride along d,
// row offsets multiples of kVec, f32 / bf16, aligned.
bool mod_vec_ok(const ModArgs& m);

// Without scale/shift: rms_norm(x, weight); with them: rms_norm_modulate(x, scale, shift). With
// `into` (x's shape and the result dtype) the result goes there; x and `into` are read / written
// in place when both are contiguous or both segmented views (RmsCall::segmented), else x is
// copied and `into` must be contiguous.
RmsCall rms_call(const Tensor& x, const Tensor& weight, const ops::Summed& scale,
                 const ops::Summed& shift, double eps, const Tensor& into = Tensor());

// Whether rms_norm_vec_kernel (norm.cu) can run the call: d % kVec == 0, every operand f32 or bf16
// with 16-byte aligned vectors, the row within kRowVecMaxBytes.
bool rows_vec_ok(const RmsCall& c);

}  // namespace ltx::cuda::row_norm
