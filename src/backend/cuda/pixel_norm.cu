// PixelNorm over a dim (rms_norm_dim, the VAE's norm), its SiLU and pre-norm bias fusions, and the
// ResNet block's skip fused with the next PixelNorm + SiLU (pixel_norm.h).
#include "backend/cuda/pixel_norm.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/row_norm.cuh"
#include "backend/common/reduce_plan.h"
#include "backend/common/scalar_math.h"
#include "op_types/checks.h"

namespace ltx::cuda {

using namespace row_norm;

namespace {

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
// 3.2 for the plain PixelNorm, bench/RESULTS.md), while the normalised value it applies SiLU to is
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
// branch-free one drops the per-value branches (the per-value form issues 41 instructions a value;
// 0.208 against 0.156 ms a 512-channel pass, bench/RESULTS.md). Kept as the check compares them:
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

}  // namespace

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

}  // namespace ltx::cuda
