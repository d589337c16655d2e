// The transformer block's gated residual add fused with the next AdaLN norm
// (ops::gated_add_rms_norm_modulate, residual_norm.h).
#include "backend/cuda/residual_norm.h"

#include <algorithm>
#include <cstdint>

#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/rms_row.cuh"
#include "backend/cuda/row_norm.cuh"
#include "backend/common/scalar_math.h"
#include "backend/common/strided_layout.h"
#include "op_types/checks.h"

namespace ltx::cuda {

using namespace row_norm;

namespace {

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
// current one, so that the loads' latency (the kernels' largest stall in Nsight Compute,
// bench/RESULTS.md) overlaps work; each thread copies the chunks it reads itself (no barrier).
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

}  // namespace

namespace {

// The fused residual + norm call's arguments; ok false when the kernel does not take them (see
// residual_norm.h).
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

}  // namespace ltx::cuda
