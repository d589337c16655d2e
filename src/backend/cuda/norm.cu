#include "backend/cuda/norm.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/fast_div.cuh"
#include "backend/cuda/rms_row.cuh"
#include "backend/cuda/row_norm.cuh"
#include "backend/common/scalar_math.h"
#include "backend/common/strided_layout.h"
#include "op_types/checks.h"

namespace ltx::cuda {

using namespace row_norm;

namespace {

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

}  // namespace

namespace row_norm {

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
    if (s->has_runs()) *s = ops::Summed(materialize(*s));
}

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

bool mod_vec_ok(const ModArgs& m) {
  for (int k = 0; k < kModOperands; ++k) {
    if (m.p[k] == nullptr) continue;
    if (m.last[k] != 1 || !vec_dtype(m.dtype[k]) || !aligned16(m.p[k])) return false;
    for (int d = 0; d < m.lead; ++d)
      if (m.stride[k][d] % kVec != 0) return false;
  }
  return true;
}

RmsCall rms_call(const Tensor& x, const Tensor& weight, const ops::Summed& scale,
                 const ops::Summed& shift, double eps, const Tensor& into) {
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

}  // namespace row_norm

namespace {

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
