// Hopper (sm_90a) 3-D neighborhood attention for bf16 q/k/v, head dim 64, with warpgroup MMAs
// (natten.na3d semantics, see src/ops/neighborhood_attention.h; the dispatch is in
// neighborhood_attention.cu: Auto takes it wherever it applies).
//
// Design (attention_wgmma.cu's FlashAttention-3 structure on a neighborhood):
// - A block owns an 8 x 4 x 4 (t, h, w) query tile of one (batch, head) and has three warpgroups.
//   Consumer warpgroup c (1 and 2) owns the 4 x 4 x 4 sub-tile at t offset 4 (c - 1): 64 query rows,
//   one wgmma M. Row m of a consumer is (m / 16, (m / 4) % 4, m % 4), so warp w of the warpgroup
//   owns the query plane t = 4 (c - 1) + w (its window along t is warp-uniform). Q is gathered once
//   by the consumer's own threads with cp.async into the 128-byte-swizzled layout.
// - The block's keys are one box: the union of its queries' windows along t (up to 8 + Kt - 1
//   planes) times a fixed BH x BW (h, w) rectangle, BH = min(4 + Kh - 1, H), BW = min(4 + Kw - 1, W),
//   starting at the union's low corner (it always covers the union; the part past the volume reads
//   as zeros). The K/V tile is one t-plane of that box: BH x BW keys ordered h-major (row
//   hh * BW + ww). That plane is a rectangular slice of the strided [T, H, W, heads, D] view, so the
//   producer warpgroup loads it with a single 5-D TMA box (D, heads, W, H, T) = (64, 1, BW, BH, 1)
//   with the 128-byte swizzle, K and V through their own mbarrier stages (full / empty), kStages
//   planes ahead. The consumers work on sub-tiles of kN keys (64 or 104; a plane of up to 208 keys
//   is two sub-tiles of 104, so that S, P and O fit the 168 registers ptxas allots every thread of a
//   384-thread block); rows past the plane are zeros (written once, never by TMA).
// - Per sub-tile a consumer issues S = Q K^T (wgmma m64nNk16, both operands from shared memory,
//   K-major) and O += P V (m64n64k16, P from registers, V through the transposed MN-major
//   descriptor); S of sub-tile u + 1 and P V of sub-tile u are in flight together, the online softmax
//   of u + 1 runs meanwhile (as attention_wgmma.cu, without the consumers' turn taking: their plane
//   ranges differ).
// - Masks on the tensor cores: the (h, w) part of the window rule does not depend on the plane.
//   Q gets a fifth k-step of one-hot columns (row m: a 1 in column m % 16, its (h, w) index in the
//   4 x 4 tile; shared by both consumers) and K a fifth k-step of per-block bias rows (key j,
//   column c: 0 if j is in query c's (h, w) window, else -2^24; built once per block, the same for
//   every plane), so S arrives masked and the softmax has no per-element mask work. A plane outside
//   a warp's t window is dropped per row (the running max kept, p = exp2(x * 0 - inf) = 0). Costs a
//   fifth m64nNk16 per sub-tile (+25% of the Q K^T tensor work, 8 + 27 KiB of shared memory), and
//   measured faster than per-element bit masks in the softmax (bench/RESULTS.md). Same numerics
//   for every key in a window (the bias step adds exact zeros); a row whose keys so far were all
//   masked carries a biased max until its first window key, whose correction factor
//   exp2(-(>= 2^24 - |logits|) * sl) flushes those terms to exactly 0. The loop's operand
//   descriptors are built from block constants (a low-word add each).
// - Skipping: a consumer only computes the planes of its own t union (its 4 planes' windows: 14 of
//   the block's 18 for Kt = 11); for the others it waits for the plane and releases it.
//
// Expected efficiency (11^3 window, interior; unmeasured): a consumer scores 14 planes x 208
// columns = 2912 keys per query row for 1331 window keys (46% of the Q K^T work; P V runs 112 keys
// per 104-key sub-tile, 42%). The mma.sync kernel scores 66% useful keys but is issue bound;
// wgmma needs far fewer issue slots per key and the CUDA-core work per scored element is the
// dense kernel's (mask test, max, one exp2, sum), so this kernel runs about twice as many window
// FLOPs a second (bench/RESULTS.md). K/V traffic per block is the tensor-core kernel's box (3528
// keys per 128 queries), far below what the L2 serves.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/attention.h"
#include "backend/cuda/device.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/mma_primitives.cuh"
#include "backend/cuda/neighborhood_attention.h"
#include "backend/cuda/neighborhood_window.cuh"
#include "backend/cuda/online_softmax.cuh"
#include "backend/cuda/stream.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_primitives.cuh"

namespace ltx::cuda {

namespace {

constexpr int kConsumers = 2;                     // consumer warpgroups per block
constexpr int kThreads = 128 * (kConsumers + 1);  // + the producer warpgroup
[[maybe_unused]] constexpr int kConsumerThreads = 128 * kConsumers;
constexpr int kDim = 64;                          // head dim (one 128-byte swizzle row)
constexpr int kWgT = 4, kWgH = 4, kWgW = 4;       // a consumer's query tile (64 rows)
constexpr int kBlockT = kWgT * kConsumers;        // the block's: 8 x 4 x 4
constexpr int kRowsQ = 64 * kConsumers;
constexpr int kStages = 3;                        // K/V planes in shared memory
constexpr int kMaxKeys = 208;                     // the largest plane (2 x 104 keys)

struct NaWgmmaArgs {
  const __nv_bfloat16* q = nullptr;  // batch b's origin, head dim dense
  __nv_bfloat16* out = nullptr;      // batch b's origin of the contiguous [B, T, H, W, heads, 64]
  int64_t qs[4] = {};                // strides of T, H, W, head
  int len[3] = {};                   // T, H, W
  int kern[3] = {};                  // clamped to the lengths
  int box_h = 0, box_w = 0;          // the plane rectangle BH x BW
  int tiles[3] = {};                 // block tiles along t, h, w (w: over the query columns)
  int q_w0 = 0, q_wn = 0;            // the query columns [q_w0, q_w0 + q_wn); out has q_wn
  int heads = 0;
  float scale = 0.f;
};

// Tensor maps of k and v for one batch: dims (D, heads, W, H, T), boxes (64, 1, BW, BH, 1).
struct NaWgmmaMaps {
  CUtensorMap k, v;
};

constexpr uint32_t kQBytes = kRowsQ * kDim * 2;
// A plane stage holds kSub sub-tiles of kN keys; the last sub-tile's P V reads whole k16 steps, so
// the stage has rows up to the next multiple of 16 (zeros past the plane).
template <int kN, int kSub>
constexpr int plane_rows() {
  return (kSub - 1) * kN + (kN + 15) / 16 * 16;
}
template <int kN, int kSub>
constexpr uint32_t tile_bytes() {
  return plane_rows<kN, kSub>() * kDim * 2;
}
// The mbarriers: the K / V ring's (wgmma::KvBarriers).
constexpr int kBarriers = wgmma::KvBarriers<kStages>::kCount;
// The MMA mask's operands: the one-hot rows of the fifth Q k-step (64 rows, shared by both
// consumers) and the block's (h, w) window biases as a fifth K k-step (a plane's rows), each row
// in a 128-byte swizzled row of its own (only its first 32 bytes are read).
template <int kN, int kSub>
constexpr uint32_t mask_bytes() {
  return 64 * 128 + tile_bytes<kN, kSub>();
}
// +1024: the dynamic shared memory is re-aligned to the 1024-byte swizzle atom.
template <int kN, int kSub>
constexpr size_t smem_bytes() {
  return kQBytes + mask_bytes<kN, kSub>() + 2 * kStages * tile_bytes<kN, kSub>() + 8 * kBarriers + 1024;
}
static_assert(smem_bytes<104, 2>() <= 227 * 1024, "the largest instance fits an H100/H200 SM");
// The masked logits' bias (-2^24 in bf16, exact): far enough below any real logit that their
// exponentials underflow to 0 once the row has seen a key of its window.
[[maybe_unused]] constexpr uint16_t kMaskBiasBf16 = 0xCB80;
[[maybe_unused]] constexpr uint16_t kOneBf16 = 0x3F80;

#if LTX_WGMMA_DEVICE_CODE
template <int kN, bool kAccumulate>
__device__ __forceinline__ void wgmma_qk(float (&s)[kN / 2], uint64_t da, uint64_t db) {
  if constexpr (kN == 64) {
    wgmma::wgmma_ss_m64n64k16<kAccumulate>(s, da, db);
  } else {
    static_assert(kN == 104, "sub-tiles of 64 or 104 keys");
    wgmma::wgmma_ss_m64n104k16<kAccumulate>(s, da, db);
  }
}
#endif

// The (h, w) window rule as a fifth k-step of Q K^T (one-hot query columns times the block's bias
// rows: 0 in the window, -2^24 outside) and the plane's t rule as per-row selects, so the softmax
// has no per-element mask work.
template <int kN, int kSub>
__global__ void __launch_bounds__(kThreads, 1)
    na_wgmma_kernel(const __grid_constant__ NaWgmmaMaps maps, const NaWgmmaArgs a) {
#if LTX_WGMMA_DEVICE_CODE
  constexpr int kQkSteps = kDim / 16;  // k-steps of Q K^T
  constexpr int kPvSteps = (kN + 15) / 16;  // k-steps of P V (the last one half empty for 104)
  constexpr int kOut = kDim / 2;       // O accumulators per thread
  constexpr int kS = kN / 2;           // S accumulators per thread
  constexpr int kRows = plane_rows<kN, kSub>();
  constexpr uint32_t kTileBytes = tile_bytes<kN, kSub>();
  constexpr uint32_t kSubBytes = kN * kDim * 2;  // 1024-byte multiple: kN is one of 8
  static_assert(kN % 8 == 0, "sub-tiles of whole 8-key groups");

  extern __shared__ unsigned char smem_raw[];
  const uint32_t smem = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const uint32_t q_smem = smem;
  const uint32_t qx_smem = smem + kQBytes, kx_smem = qx_smem + 64 * 128;  // the mask's operands
  const uint32_t stages = smem + kQBytes + mask_bytes<kN, kSub>();
  const auto k_smem = [=](int stage) { return stages + stage * kTileBytes; };
  const auto v_smem = [=](int stage) { return stages + (kStages + stage) * kTileBytes; };
  const uint32_t bars = stages + 2 * kStages * kTileBytes;
  const wgmma::KvBarriers<kStages> kv{bars};

  // Heads vary fastest: the blocks of one query tile run together and share their K/V planes in L2.
  const int head = blockIdx.x % a.heads;
  int rest = blockIdx.x / a.heads;
  const int tile_w = rest % a.tiles[2];
  rest /= a.tiles[2];
  const int tile_h = rest % a.tiles[1], tile_t = rest / a.tiles[1];
  const int q0[3] = {tile_t * kBlockT, tile_h * kWgH, a.q_w0 + tile_w * kWgW};
  const int q_w_end = a.q_w0 + a.q_wn;
  const AxisRange rt = axis_range(q0[0], kBlockT, a.len[0], a.kern[0]);
  const int lo_t = rt.lo, num_tiles = rt.hi - rt.lo;  // the block's planes
  const int lo_h = axis_range(q0[1], kWgH, a.len[1], a.kern[1]).lo;
  const int lo_w = axis_range(q0[2], kWgW, a.len[2], a.kern[2]).lo;
  const int plane_keys = a.box_h * a.box_w;
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128;

  // Zero the padding rows [plane_keys, kRows) of every stage once (TMA never writes them; V's must
  // be finite for P V, where their probabilities are 0), then make them visible to the async proxy.
  for (int i = tid; i < 2 * kStages * (kRows - plane_keys) * 8; i += kThreads) {
    const int chunk = i % 8, row = plane_keys + (i / 8) % (kRows - plane_keys),
              tile = i / (8 * (kRows - plane_keys));
    const uint32_t addr = stages + tile * kTileBytes + mma::swizzled<8>(row, chunk);
    asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0) : "memory");
  }
  {
    // The one-hot Q columns: row m (query (h, w) index m % 16 of the 4 x 4 tile) has a 1 in
    // column m % 16; 16-byte chunks 0 and 1 of each row hold columns 0..15.
    for (int i = tid; i < 64 * 2; i += kThreads) {
      const int m = i / 2, chunk = i % 2;
      uint32_t w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 8 * chunk + 2 * e;
        w[e] = (col == m % 16 ? kOneBf16 : 0u) | (col + 1 == m % 16 ? uint32_t{kOneBf16} << 16 : 0u);
      }
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(qx_smem + mma::swizzled<8>(m, chunk)),
                   "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                   : "memory");
    }
    // The bias rows: plane key j (h-major in the BH x BW rectangle; rows past the plane masked)
    // against query (h, w) index c = 4 hi + wi of the tile, positions clamped as the Q gather's.
    for (int i = tid; i < kRows * 2; i += kThreads) {
      const int j = i / 2, chunk = i % 2;
      const int hh = j / a.box_w + lo_h, ww = j % a.box_w + lo_w;
      uint32_t w[4];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int col = 8 * chunk + e;
        const int ws_h = window_start(min(q0[1] + col / 4, a.len[1] - 1), a.len[1], a.kern[1]);
        const int ws_w = window_start(min(q0[2] + col % 4, a.len[2] - 1), a.len[2], a.kern[2]);
        const bool in = j < plane_keys &&
                        static_cast<unsigned>(hh - ws_h) < static_cast<unsigned>(a.kern[1]) &&
                        static_cast<unsigned>(ww - ws_w) < static_cast<unsigned>(a.kern[2]);
        const uint32_t bits = in ? 0u : kMaskBiasBf16;
        if (e % 2 == 0) {
          w[e / 2] = bits;
        } else {
          w[e / 2] |= bits << 16;
        }
      }
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(kx_smem + mma::swizzled<8>(j, chunk)),
                   "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                   : "memory");
    }
  }
  wgmma::fence_proxy_async();
  if (tid == 0) {
    kv.init(kConsumerThreads);
    wgmma::mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues every copy; stage t % kStages is refilled once both consumers
    // released its previous plane.
    wgmma::setmaxnreg_dec<24>();
    if (tid == 0) {
      const uint32_t bytes = static_cast<uint32_t>(plane_keys) * kDim * 2;
      for (int t = 0; t < num_tiles; ++t) {
        const int stage = t % kStages;
        const uint32_t parity = ((t / kStages) & 1) ^ 1;
        wgmma::mbar_wait(kv.k_empty(stage), parity);
        wgmma::mbar_arrive_expect_tx(kv.k_full(stage), bytes);
        wgmma::tma_load_5d(k_smem(stage), &maps.k, 0, head, lo_w, lo_h, lo_t + t, kv.k_full(stage));
        wgmma::mbar_wait(kv.v_empty(stage), parity);
        wgmma::mbar_arrive_expect_tx(kv.v_full(stage), bytes);
        wgmma::tma_load_5d(v_smem(stage), &maps.v, 0, head, lo_w, lo_h, lo_t + t, kv.v_full(stage));
      }
    }
    return;
  }
  wgmma::setmaxnreg_inc<240>();

  const int cw = wg - 1;  // consumer index
  const int ltid = tid % 128;
  const int warp = ltid / 32, lane = tid & 31;
  const int g = lane >> 2, c4 = lane & 3;  // accumulator coordinates: row group, column pair
  const int wq_t = q0[0] + cw * kWgT;      // this consumer's first query plane
  const uint32_t q_wg = q_smem + cw * (64 * 128);

  // Q: row m = (m / 16, (m / 4) % 4, m % 4) of the consumer's tile; rows past the volume are zeros.
  {
    const __nv_bfloat16* qb = a.q + head * a.qs[3];
#pragma unroll
    for (int i = ltid; i < 64 * 8; i += 128) {
      const int m = i / 8, c = i % 8;
      const int t = wq_t + m / 16, h = q0[1] + (m / 4) % 4, w = q0[2] + m % 4;
      const bool valid = t < a.len[0] && h < a.len[1] && w < q_w_end;
      const int64_t off = valid ? t * a.qs[0] + h * a.qs[1] + w * a.qs[2] + c * 8 : 0;
      mma::cp_async_16(q_wg + mma::swizzled<8>(m, c), qb + off, valid);
    }
    mma::cp_async_commit();
    mma::cp_async_wait<0>();
    wgmma::fence_proxy_async();  // generic-proxy writes, read by wgmma
    wgmma::named_sync(1 + cw, 128);
  }

  // This thread's rows: m = 16 warp + g + 8 r -> (warp, g / 4 + 2 r, g % 4). Window starts relative
  // to the key box (positions clamped for rows past the volume; those are never stored).
  const int pt = wq_t + warp;
  const int ws_t = window_start(min(pt, a.len[0] - 1), a.len[0], a.kern[0]) - lo_t;
  // The consumer's planes [first, end): the union of its query planes' t windows (none when all its
  // queries lie past the volume; consumer 0's queries start at the block's, inside the volume).
  int first = 0, end = 0;
  if (wq_t < a.len[0]) {
    const AxisRange r = axis_range(wq_t, kWgT, a.len[0], a.kern[0]);
    first = r.lo - lo_t;
    end = r.hi - lo_t;
  }

  float o[kOut];
#pragma unroll
  for (int i = 0; i < kOut; ++i) o[i] = 0.f;
  float s[kS];
  uint32_t p[kPvSteps][4];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  const float sl = a.scale * mma::kLog2e;

  const auto stage_of = [](int t) { return t % kStages; };
  const auto parity_of = [](int t) { return static_cast<uint32_t>((t / kStages) & 1); };
  // A plane outside this consumer's range: wait for it (so that the arrival counts for this
  // plane's phase, not an earlier one) and release it.
  const auto pass = [&](int t) {
    wgmma::mbar_wait(kv.k_full(stage_of(t)), parity_of(t));
    wgmma::mbar_arrive(kv.k_empty(stage_of(t)));
    wgmma::mbar_wait(kv.v_full(stage_of(t)), parity_of(t));
    wgmma::mbar_arrive(kv.v_empty(stage_of(t)));
  };
  // Work unit u: sub-tile u % kSub of the block's plane u / kSub.
  const auto plane_of = [](int u) { return u / kSub; };
  const auto sub_of = [](int u) { return u % kSub; };
  // S = Q K^T for this consumer's 64 rows and unit u's keys (issued and committed only), the window
  // bias as a fifth k-step. The descriptors are built from block constants: a descriptor's low
  // word is its address / 16 (shared addresses stay below 256 KB: no carry out of the 14-bit
  // field), so an operand's offset is added to a base descriptor's low word.
  const uint64_t q_desc0 = wgmma::smem_desc(q_wg, 16, 1024);
  const uint64_t k_desc0 = wgmma::smem_desc(k_smem(0), 16, 1024);
  const uint64_t v_desc0 = wgmma::smem_desc(v_smem(0), kRows * 128, 1024);
  const auto desc_plus = [](uint64_t desc, uint32_t bytes) {
    return (desc & 0xFFFFFFFF00000000ull) | (static_cast<uint32_t>(desc) + (bytes >> 4));
  };
  const auto issue_qk = [&](int u) {
    const uint32_t k_off = stage_of(plane_of(u)) * kTileBytes + sub_of(u) * kSubBytes;
#pragma unroll
    for (int kk = 0; kk < kQkSteps; ++kk) {
      const uint64_t da = desc_plus(q_desc0, kk * 32);
      const uint64_t db = desc_plus(k_desc0, k_off + kk * 32);
      if (kk == 0) {
        wgmma_qk<kN, false>(s, da, db);
      } else {
        wgmma_qk<kN, true>(s, da, db);
      }
    }
    {  // + the window bias: s of a key outside the (h, w) window - 2^24
      const uint64_t da = wgmma::smem_desc(qx_smem, 16, 1024);
      const uint64_t db = wgmma::smem_desc(kx_smem + sub_of(u) * kSubBytes, 16, 1024);
      wgmma_qk<kN, true>(s, da, db);
    }
    wgmma::commit();
  };
  // O += P V for unit u's values (issued and committed only; MN-major V, 8-key groups 1024 bytes
  // apart).
  const auto issue_pv = [&](int u) {
    const uint32_t v_off = stage_of(plane_of(u)) * kTileBytes + sub_of(u) * kSubBytes;
#pragma unroll
    for (int j = 0; j < kPvSteps; ++j) {
      const uint64_t dv = desc_plus(v_desc0, v_off + j * (16 * 128));
      wgmma::wgmma_rs_m64n64k16<true>(o, p[j], dv);
    }
    wgmma::commit();
  };
  // Online softmax of unit u's scores in s (in place: s becomes the probabilities); corr[r] is the
  // factor that moves row r's accumulator to the new running max.
  //
  // The (h, w) rule is in s already (bias -2^24); a plane outside the warp's t window leaves the
  // running max alone and gets p = exp2(x * 0 - inf) = 0. A row whose keys so far were
  // all outside its window may carry a biased max for a while; its first window key moves the max
  // up by >= 2^24 - |logits|, and the correction exp2(-(that) * sl) flushes those terms to 0.
  const auto softmax = [&](int u, float (&corr)[2]) {
    const bool keep = static_cast<unsigned>(plane_of(u) - ws_t) < static_cast<unsigned>(a.kern[0]);
    mma::online_softmax_tile<false>(s, m_run, l_run, sl, keep, corr);
  };
  // The probabilities as the A operand of P V: k-step j covers n-tiles 2j and 2j + 1 of S.
  const auto pack_p = [&] {
#pragma unroll
    for (int j = 0; j < kPvSteps; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = 8 * j + 2 * i;  // past kS: keys past the sub-tile (kN 104), p = 0
        p[j][i] = e < kS ? mma::pack_bf16(s[e], s[e + 1]) : 0u;
      }
    }
  };

  // S of the consumer's first unit u.
  const auto first_step = [&](int u) {
    wgmma::mbar_wait(kv.k_full(stage_of(plane_of(u))), parity_of(plane_of(u)));
    wgmma::fence();
    issue_qk(u);
    wgmma::wait<0>();
    wgmma::fence_regs(s);
    if (sub_of(u) == kSub - 1) wgmma::mbar_arrive(kv.k_empty(stage_of(plane_of(u))));
    float corr[2];
    softmax(u, corr);  // o is still zero: nothing to rescale
    pack_p();
  };
  // P V of unit u and S of unit u + 1: P V of u overlaps S and the softmax of u + 1.
  // A plane's K stage is released after the S of its last sub-tile, its V stage after that
  // sub-tile's P V. No branch around the wgmma issues (ptxas serialises wgmma pipelines whose
  // accumulators merge across branches).
  const auto mid_step = [&](int u) {
    const int cur = plane_of(u), next = plane_of(u + 1);
    wgmma::mbar_wait(kv.k_full(stage_of(next)), parity_of(next));
    wgmma::mbar_wait(kv.v_full(stage_of(cur)), parity_of(cur));
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_qk(u + 1);
    issue_pv(u);
    wgmma::wait<1>();  // S of unit u + 1; P V of unit u may still run
    wgmma::fence_regs(s);
    if (sub_of(u + 1) == kSub - 1) wgmma::mbar_arrive(kv.k_empty(stage_of(next)));
    float corr[2];
    softmax(u + 1, corr);
    wgmma::wait<0>();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    if (sub_of(u) == kSub - 1) wgmma::mbar_arrive(kv.v_empty(stage_of(cur)));
#pragma unroll
    for (int i = 0; i < kOut; ++i) o[i] *= corr[(i >> 1) & 1];
    pack_p();
  };
  // P V of the consumer's last unit u (the last sub-tile of its plane).
  const auto last_step = [&](int u) {
    const int plane = plane_of(u);
    wgmma::mbar_wait(kv.v_full(stage_of(plane)), parity_of(plane));
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_pv(u);
    wgmma::wait<0>();
    wgmma::fence_regs(o);
    wgmma::mbar_arrive(kv.v_empty(stage_of(plane)));  // the producer may still need the stage
  };

  // Units [u0, u1) of planes [first, end); the other planes are passed.
  const int u0 = first * kSub, u1 = end * kSub;
  for (int t = 0; t < first; ++t) pass(t);
  if (u0 < u1) first_step(u0);
  for (int u = u0; u + 1 < u1; ++u) mid_step(u);
  if (u0 < u1) last_step(u1 - 1);
  for (int t = end; t < num_tiles; ++t) pass(t);

  // Normalise and store: this thread holds dims (8n + 2 c4, +1) of its rows.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = mma::quad_sum(l_run[r]);
    const int ph = q0[1] + g / 4 + 2 * r, pw = q0[2] + g % 4;
    if (pt >= a.len[0] || ph >= a.len[1] || pw >= q_w_end) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int64_t row =
        ((static_cast<int64_t>(pt) * a.len[1] + ph) * a.q_wn + (pw - a.q_w0)) * a.heads + head;
    __nv_bfloat16* dst = a.out + row * kDim + 2 * c4;
#pragma unroll
    for (int n = 0; n < kDim / 8; ++n) {
      *reinterpret_cast<uint32_t*>(dst + n * 8) =
          mma::pack_bf16(o[4 * n + 2 * r] * inv, o[4 * n + 2 * r + 1] * inv);
    }
  }
#else
  (void)maps;
  (void)a;  // no sm_90a image: the host never launches this (wgmma_attention_available)
#endif
}

// The plane rectangle of a block (BH, BW) and the sub-tiles holding it: `keys` of 64 (one
// sub-tile), 104 (one) or 208 (two of 104); 0: none fits.
struct PlaneShape {
  int box_h, box_w, keys;
};
PlaneShape plane_shape(const Tensor& q, const std::array<int64_t, 3>& kernel) {
  PlaneShape p{};
  p.box_h = static_cast<int>(std::min(kWgH + std::min(kernel[1], q.size(2)) - 1, q.size(2)));
  p.box_w = static_cast<int>(std::min(kWgW + std::min(kernel[2], q.size(3)) - 1, q.size(3)));
  const int64_t n = static_cast<int64_t>(p.box_h) * p.box_w;
  p.keys = n <= 64 ? 64 : n <= 104 ? 104 : n <= kMaxKeys ? kMaxKeys : 0;
  return p;
}

// TMA maps take 16-byte multiples below 2^40 bytes as strides; a size-1 dim may carry any stride:
// it gets the packed one.
bool tma_strides_ok(const Tensor& t) {
  for (int i = 1; i < 5; ++i) {
    if (t.size(i) > 1 && (t.stride(i) <= 0 || t.stride(i) % 8 != 0 || t.stride(i) >= (int64_t{1} << 38)))
      return false;
  }
  return true;
}

// The TMA map of batch `b` of a bf16 [B, T, H, W, heads, 64] operand: dims (D, heads, W, H, T),
// boxes (64, 1, BW, BH, 1) with the 128-byte swizzle; keys past the volume read as zeros.
CUtensorMap plane_map(const Tensor& t, int64_t b, const PlaneShape& ps) {
  const cuuint64_t dims[5] = {static_cast<cuuint64_t>(kDim), static_cast<cuuint64_t>(t.size(4)),
                              static_cast<cuuint64_t>(t.size(3)), static_cast<cuuint64_t>(t.size(2)),
                              static_cast<cuuint64_t>(t.size(1))};
  cuuint64_t strides[4];
  cuuint64_t packed = kDim * 2;
  for (int i = 0; i < 4; ++i) {
    const int dim = 4 - i;  // heads, W, H, T
    strides[i] = t.size(dim) > 1 ? static_cast<cuuint64_t>(t.stride(dim)) * 2 : packed;
    packed = strides[i] * dims[i + 1];
  }
  const cuuint32_t box[5] = {static_cast<cuuint32_t>(kDim), 1, static_cast<cuuint32_t>(ps.box_w),
                             static_cast<cuuint32_t>(ps.box_h), 1};
  const auto* base = static_cast<const __nv_bfloat16*>(t.raw_data()) + b * t.stride(0);
  return bf16_swizzled_tensor_map(base, 5, dims, strides, box,
                                  "neighborhood_attention_3d (wgmma)", t);
}

template <int kN, int kSub>
void launch(const NaWgmmaMaps& maps, const NaWgmmaArgs& a, cudaStream_t stream) {
  constexpr size_t kSmem = smem_bytes<kN, kSub>();
  allow_dynamic_smem(reinterpret_cast<const void*>(na_wgmma_kernel<kN, kSub>), kSmem);
  const int64_t blocks = static_cast<int64_t>(a.tiles[0]) * a.tiles[1] * a.tiles[2] * a.heads;
  na_wgmma_kernel<kN, kSub><<<static_cast<unsigned>(blocks), kThreads, kSmem, stream>>>(maps, a);
  LTX_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool wgmma_neighborhood_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const std::array<int64_t, 3>& kernel) {
  if (q.dtype() != DType::BF16 || k.dtype() != DType::BF16 || v.dtype() != DType::BF16)
    return false;
  if (q.size(5) != kDim || v.size(5) != kDim) return false;
  for (int i = 1; i < 4; ++i)
    if (q.size(i) >= (int64_t{1} << 24)) return false;
  if (q.size(4) >= (int64_t{1} << 24)) return false;
  if (!bf16_rows_loadable(q) || !bf16_rows_loadable(k) || !bf16_rows_loadable(v)) return false;
  if (!tma_strides_ok(k) || !tma_strides_ok(v)) return false;
  if (plane_shape(q, kernel).keys == 0) return false;  // the (h, w) box exceeds 208 keys
  int64_t blocks = q.size(4);
  const int64_t bd[3] = {kBlockT, kWgH, kWgW};
  for (int d = 0; d < 3; ++d) blocks *= (q.size(1 + d) + bd[d] - 1) / bd[d];
  if (blocks >= (int64_t{1} << 31)) return false;
  return wgmma_attention_available(q.device().index);
}

void wgmma_neighborhood_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const std::array<int64_t, 3>& kernel, float scale,
                                  const ops::QueryColumns& cols, Tensor& out) {
  const PlaneShape ps = plane_shape(q, kernel);
  NaWgmmaArgs a;
  for (int i = 0; i < 4; ++i) a.qs[i] = q.stride(1 + i);
  const int64_t bd[3] = {kBlockT, kWgH, kWgW};
  for (int d = 0; d < 3; ++d) {
    a.len[d] = static_cast<int>(q.size(1 + d));
    a.kern[d] = static_cast<int>(std::min(kernel[d], q.size(1 + d)));
    a.tiles[d] = static_cast<int>((q.size(1 + d) + bd[d] - 1) / bd[d]);
  }
  a.q_w0 = static_cast<int>(cols.begin);
  a.q_wn = static_cast<int>(out.size(3));
  a.tiles[2] = static_cast<int>((out.size(3) + kWgW - 1) / kWgW);
  a.box_h = ps.box_h;
  a.box_w = ps.box_w;
  a.heads = static_cast<int>(q.size(4));
  a.scale = scale;
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t s = current_stream(dev).handle();
  // One launch per batch entry: the 5-D maps have no room for the batch dim.
  for (int64_t b = 0; b < q.size(0); ++b) {
    NaWgmmaMaps maps;
    maps.k = plane_map(k, b, ps);
    maps.v = plane_map(v, b, ps);
    a.q = static_cast<const __nv_bfloat16*>(q.raw_data()) + b * q.stride(0);
    a.out = static_cast<__nv_bfloat16*>(out.raw_data()) + b * (out.numel() / q.size(0));
    switch (ps.keys) {
      case 64: launch<64, 1>(maps, a, s); break;
      case 104: launch<104, 1>(maps, a, s); break;
      default: launch<104, 2>(maps, a, s); break;
    }
  }
}

}  // namespace ltx::cuda
