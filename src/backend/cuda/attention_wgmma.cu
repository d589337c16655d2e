// Hopper (sm_90a) flash attention for bf16 q/k/v with warpgroup MMAs (see attention.h for the
// contract). FlashAttention-3's structure:
//
// A block owns 128 query rows of one (batch, head) and has three warpgroups. The first is the
// producer: one thread streams Q once and then K and V, 128 keys per tile, through three
// shared-memory stages with TMA (tiled tensor maps over the [B, H, T, D] strides, 128-byte swizzle,
// rows past T zero-filled), signalling "full" mbarriers; it gives most of its registers to the other
// two (setmaxnreg). Those are the consumers, 64 query rows each. Per key tile a consumer issues
// S = Q K^T (wgmma m64n128k16, both operands from shared memory through K-major descriptors) and
// O += P V (m64nDk16, P from registers, V from shared memory through the transposed "MN-major"
// descriptor, so V needs no transposed copy), and releases each stage through an "empty" mbarrier
// as soon as the product that reads it has completed. S of tile t + 1 and P.V of tile t are in
// flight together: the online softmax of tile t + 1 runs on the CUDA cores while the tensor cores
// finish P.V of tile t. The softmax itself is online_softmax.cuh's (the wgmma accumulator layout is
// the mma.sync one, repeated), probabilities rounded to bf16 for P.V.
//
// Split keys (flash-decoding): when the (query tile, batch, head) blocks cannot fill the GPU and the
// key sequence is long (the audio stream's 126 queries over 6144 or 24576 video keys: 32 blocks on
// 132 SMs, each walking 48-192 key tiles), blockIdx.z splits the key tiles into ranges. Each range's
// block keeps the same loop and writes its unnormalised f32 output with its running max and sum;
// a second kernel merges the ranges (the log-sum-exp rescale), normalises, gates and stores.
//
// Resident keys: the reverse shape (the video tokens' queries over the 126 audio keys: 1536 blocks
// of one key tile each, every block a serial chain of loads, two products and a store) keeps all
// key tiles in their stages (at most kStages of them) and gives each block several consecutive
// query tiles of its (batch, head): the keys are loaded once, and the next tile's Q load overlaps
// the current tile's softmax, P V and store (a q_empty mbarrier hands a Q buffer back; D 64 has
// two, so the next tile's Q is in flight while the current one's products run). Longer key
// sequences keep one query tile a block (several tiles a block over streamed keys measured slower:
// bench/RESULTS.md).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "backend/cuda/attention.h"
#include "backend/cuda/attention_mask.cuh"
#include "backend/cuda/device.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/mma_primitives.cuh"
#include "backend/cuda/online_softmax.cuh"
#include "backend/cuda/stream.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_primitives.cuh"

namespace ltx::cuda {

namespace {

// 1 in the sm_90a image, 0 in every other one: the host reads it from the image the driver loaded
// for a device to know whether the kernel below has a body there.
__device__ int g_wgmma_image = LTX_WGMMA_DEVICE_CODE;

constexpr int kConsumers = 2;                     // consumer warpgroups per block
constexpr int kThreads = 128 * (kConsumers + 1);  // + the producer warpgroup
[[maybe_unused]] constexpr int kConsumerThreads = 128 * kConsumers;
constexpr int kRowsQ = 64 * kConsumers;  // query rows per block
constexpr int kKeys = 128;               // keys per tile (and the TMA box's rows)
constexpr int kStages = 3;               // K/V tiles in shared memory

// Besides the tensor maps, the kernel needs what every fused kernel does, and with split keys
// where each range's partial result goes.
struct WgmmaArgs : FusedAttentionParams {
  int tiles_per_split = 0;  // key tiles of one blockIdx.z range (all of them unsplit)
  int q_tiles_per_block = 1;  // 128-row query tiles of one block (resident keys only)
  // Split keys only: part_o [splits, B * H, Tq, D] f32 (unnormalised), part_ml [splits, B * H,
  // Tq] of (running max, sum of the probabilities exp2((x - max) * sl), sl the kernel's factor).
  float* part_o = nullptr;
  float2* part_ml = nullptr;
};

// 128-row query tiles of tq queries, 128-key tiles of tk keys.
__host__ __device__ constexpr int64_t query_tiles(int64_t tq) { return (tq + kRowsQ - 1) / kRowsQ; }
__host__ __device__ constexpr int64_t key_tiles(int64_t tk) { return (tk + kKeys - 1) / kKeys; }
// The softmax's exponent factor: exp(scale * (x - m)) = exp2((x - m) * factor); masked logits
// already carry the scale.
__host__ __device__ constexpr float exp2_factor(bool masked, float scale) {
  return masked ? mma::kLog2e : scale * mma::kLog2e;
}

template <int kDim>
constexpr uint32_t q_bytes() {
  return kRowsQ * kDim * 2;
}
template <int kDim>
constexpr uint32_t tile_bytes() {
  return kKeys * kDim * 2;
}
// The mbarriers: Q full and Q empty per Q buffer (up to two), then the K / V ring's.
constexpr int kBarriers = 4 + wgmma::KvBarriers<kStages>::kCount;
// What a block's query tiles are (the kernel's kMode): one tile, or several consecutive tiles of
// one (batch, head) over keys loaded once (every key tile has a stage).
constexpr int kOneTile = 0, kResidentKeys = 1;
// Q buffers: two for several query tiles with D 64 (D 128's second buffer would not fit with the
// stages), else one.
template <int kDim, int kMode>
constexpr int q_buffers() {
  return kMode == kResidentKeys && kDim == 64 ? 2 : 1;
}
// +1024: the dynamic shared memory is re-aligned to the 1024-byte swizzle atom.
template <int kDim>
constexpr size_t smem_bytes(int q_bufs = 1) {
  return q_bufs * q_bytes<kDim>() + 2 * kStages * tile_bytes<kDim>() + 8 * kBarriers + 1024;
}

// Tensor maps of q, k and v: dims (D, T, H, B), boxes of 64 x 128 (one 128-byte swizzle column
// block of a tile).
struct WgmmaMaps {
  CUtensorMap q, k, v;
};

#if LTX_WGMMA_DEVICE_CODE
template <int kDim>
__device__ __forceinline__ void wgmma_pv(float (&o)[kDim / 2], const uint32_t (&p)[4], uint64_t desc) {
  if constexpr (kDim == 128) {
    wgmma::wgmma_rs_m64n128k16<true>(o, p, desc);
  } else {
    wgmma::wgmma_rs_m64n64k16<true>(o, p, desc);
  }
}
#endif

template <int kDim, bool kMasked, bool kSplit, int kMode>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_attention_kernel(const __grid_constant__ WgmmaMaps maps, const WgmmaArgs a) {
#if LTX_WGMMA_DEVICE_CODE
  constexpr int kQkSteps = kDim / 16;   // k-steps of Q K^T (4 per 64-column block)
  constexpr int kPvSteps = kKeys / 16;  // k-steps of P V
  constexpr int kOut = kDim / 2;        // O accumulators per thread
  constexpr int kS = kKeys / 2;         // S accumulators per thread
  constexpr int kBlocks = kDim / 64;    // 64-column (128-byte) blocks of a row
  constexpr uint32_t kQBytes = q_bytes<kDim>(), kTileBytes = tile_bytes<kDim>();

  extern __shared__ unsigned char smem_raw[];
  const uint32_t smem = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  constexpr bool kMultiQ = kMode == kResidentKeys;
  constexpr int kQBufs = q_buffers<kDim, kMode>();
  // Query tile qi sits in Q buffer qi % kQBufs, filled for the (qi / kQBufs)-th time.
  const auto q_smem = [=](int qi) { return smem + (qi % kQBufs) * kQBytes; };
  const uint32_t kv0 = smem + kQBufs * kQBytes;
  const auto k_smem = [=](int stage) { return kv0 + stage * kTileBytes; };
  const auto v_smem = [=](int stage) { return kv0 + (kStages + stage) * kTileBytes; };
  const uint32_t bars = kv0 + 2 * kStages * kTileBytes;
  const auto q_full = [=](int qi) { return bars + 8 * (qi % kQBufs); };
  const auto q_empty = [=](int qi) { return bars + 16 + 8 * (qi % kQBufs); };
  const wgmma::KvBarriers<kStages> kv{bars + 32};

  // This block's query tiles: [q_tile0, q_tile0 + q_count) of (batch, head) blockIdx.y.
  const int64_t head_tiles = query_tiles(a.tq);
  const int64_t q_tile0 = static_cast<int64_t>(blockIdx.x) * (kMultiQ ? a.q_tiles_per_block : 1);
  int q_count = 1;
  if constexpr (kMultiQ) {
    const int64_t left = head_tiles - q_tile0;
    q_count = static_cast<int>(left < a.q_tiles_per_block ? left : a.q_tiles_per_block);
  }
  const int b = static_cast<int>(blockIdx.y) / a.heads, h = static_cast<int>(blockIdx.y) % a.heads;
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128;
  // This block's key tiles: [tile0, tile0 + num_tiles) (every tile unless the keys are split).
  const int all_tiles = static_cast<int>(key_tiles(a.tk));
  const int tile0 = static_cast<int>(blockIdx.z) * a.tiles_per_split;
  const int num_tiles = max(0, min(a.tiles_per_split, all_tiles - tile0));

  if (tid == 0) {
    for (int i = 0; i < kQBufs; ++i) {
      wgmma::mbar_init(q_full(i), 1);
      wgmma::mbar_init(q_empty(i), kConsumerThreads);
    }
    kv.init(kConsumerThreads);
    wgmma::mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues every copy; stage t % kStages is refilled once both consumers
    // released its previous tile.
    wgmma::setmaxnreg_dec<24>();
    if (tid == 0) {
      // Key tile u of the ring (its u-th load: stage u % kStages) into its stage once both
      // consumers released the stage's previous tile.
      const auto load_kv = [&](int u, int key0) {
        const int stage = u % kStages;
        const uint32_t parity = ((u / kStages) & 1) ^ 1;
        const auto load_tile = [&](const CUtensorMap* map, uint32_t dst, uint32_t full, uint32_t empty) {
          wgmma::mbar_wait(empty, parity);
          wgmma::mbar_arrive_expect_tx(full, kTileBytes);
#pragma unroll
          for (int c = 0; c < kBlocks; ++c)
            wgmma::tma_load_4d(dst + c * (kKeys * 128), map, 64 * c, key0, h, b, full);
        };
        load_tile(&maps.k, k_smem(stage), kv.k_full(stage), kv.k_empty(stage));
        load_tile(&maps.v, v_smem(stage), kv.v_full(stage), kv.v_empty(stage));
      };
      const auto load_q = [&](int qi) {
        wgmma::mbar_arrive_expect_tx(q_full(qi), kQBytes);
        const int row0 = static_cast<int>((q_tile0 + qi) * kRowsQ);
#pragma unroll
        for (int c = 0; c < kBlocks; ++c)
          wgmma::tma_load_4d(q_smem(qi) + c * (kRowsQ * 128), &maps.q, 64 * c, row0, h, b, q_full(qi));
      };
      // A further query tile once both consumers' products have read its buffer's last one.
      const auto wait_then_load_q = [&](int qi) {
        wgmma::mbar_wait(q_empty(qi), (qi / kQBufs - 1) & 1);
        load_q(qi);
      };
      for (int qi = 0; qi < kQBufs && qi < q_count; ++qi) load_q(qi);
      // One query tile: the key tiles stream through the stages. Resident keys: every tile has a
      // stage of its own, so each is loaded once (its first "empty" wait passes at once) and never
      // released.
      for (int t = 0; t < num_tiles; ++t) load_kv(t, (tile0 + t) * kKeys);
      for (int qi = kQBufs; qi < q_count; ++qi) wait_then_load_q(qi);
    }
    return;
  }
  wgmma::setmaxnreg_inc<240>();

  const int cw = wg - 1;  // consumer index
  const int warp = (tid % 128) / 32, lane = tid & 31;
  const int g = lane >> 2, c4 = lane & 3;  // accumulator coordinates: row group, column pair

  for (int qi = 0; qi < q_count; ++qi) {
  const int64_t q0 = (q_tile0 + qi) * kRowsQ;
  // Key tile t's stage and the phase of its load.
  const auto stage_of = [](int t) { return t % kStages; };
  const auto phase_of = [](int t) { return static_cast<uint32_t>((t / kStages) & 1); };
  float o[kOut];
#pragma unroll
  for (int i = 0; i < kOut; ++i) o[i] = 0.f;
  float s[kS];
  uint32_t p[kPvSteps][4];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  // This thread's query rows: row_base and row_base + 8.
  const int64_t row_base = q0 + cw * 64 + warp * 16 + g;
  // Their gate factors, loaded now: at the store the logit's load latency would stall the
  // epilogue (+4 % on the video self-attention, bench/RESULTS.md).
  float gates[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    gates[r] = row_base + r * 8 < a.tq ? a.gate_factor(b, h, row_base + r * 8) : 1.f;
  const float sl = exp2_factor(kMasked, a.scale);

  // Pingpong: the two consumers take turns issuing their MMAs, so one's softmax runs while the
  // other's products keep the tensor cores busy (32 x 6144 x 6144, D 128: 660 TFLOP/s with turns,
  // 655 without; 6144 x 1024: 497 and 480; bench/RESULTS.md). Consumer cw issues after
  // named barrier 1 + cw, then hands the turn over; each takes one turn per MMA batch, consumer 1
  // opens and skips its last hand-over, so every barrier sees as many arrivals as waits.
  const auto turn_begin = [&] { wgmma::named_sync(1 + cw, kConsumerThreads); };
  const auto turn_end = [&](bool last) {
    if (!(last && cw == 1)) wgmma::named_arrive(2 - cw, kConsumerThreads);
  };
  if (cw == 1 && num_tiles > 0) wgmma::named_arrive(1, kConsumerThreads);

  // S = Q K^T for this consumer's 64 rows and the 128 keys in `stage` (issued and committed only).
  const auto issue_qk = [&](int stage) {
#pragma unroll
    for (int kk = 0; kk < kQkSteps; ++kk) {
      const uint32_t col = (kk % 4) * 32;
      const uint64_t da = wgmma::smem_desc(
          q_smem(qi) + (kk / 4) * (kRowsQ * 128) + cw * (64 * 128) + col, 16, 1024);
      const uint64_t db = wgmma::smem_desc(k_smem(stage) + (kk / 4) * (kKeys * 128) + col, 16, 1024);
      if (kk == 0) {
        wgmma::wgmma_ss_m64n128k16<false>(s, da, db);
      } else {
        wgmma::wgmma_ss_m64n128k16<true>(s, da, db);
      }
    }
    wgmma::commit();
  };
  // O += P V for the values in `stage` (issued and committed only). V's 64-column blocks are
  // kKeys * 128 bytes apart (the leading offset of the MN-major layout), its 8-key groups 1024.
  const auto issue_pv = [&](int stage) {
#pragma unroll
    for (int j = 0; j < kPvSteps; ++j) {
      const uint64_t dv = wgmma::smem_desc(v_smem(stage) + j * (16 * 128), kKeys * 128, 1024);
      wgmma_pv<kDim>(o, p[j], dv);
    }
    wgmma::commit();
  };
  // Online softmax of tile t's scores in s (in place: s becomes the probabilities); corr[r] is the
  // factor that moves row r's accumulator to the new running max.
  const auto softmax = [&](int t, float (&corr)[2]) {
    const int64_t key0 = (tile0 + t) * int64_t{kKeys};
    if (kMasked || key0 + kKeys > a.tk) {
#pragma unroll
      for (int i = 0; i < kS; ++i) {
        float x = kMasked ? s[i] * a.scale : s[i];
        const int64_t key = key0 + (i / 4) * 8 + 2 * c4 + (i & 1);
        if constexpr (kMasked) {
          const int64_t row = row_base + ((i >> 1) & 1) * 8;
          if (key < a.tk && row < a.tq) x = a.mask.apply(x, b, h, row, key);
        }
        if (key >= a.tk) x = -INFINITY;
        s[i] = x;
      }
    }
    mma::online_softmax_tile<kMasked>(s, m_run, l_run, sl, true, corr);
  };
  // The probabilities as the A operand of P V: k-step j covers n-tiles 2j and 2j + 1 of S.
  const auto pack_p = [&] {
#pragma unroll
    for (int j = 0; j < kPvSteps; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) p[j][i] = mma::pack_bf16(s[8 * j + 2 * i], s[8 * j + 2 * i + 1]);
    }
  };

  wgmma::mbar_wait(q_full(qi), (qi / kQBufs) & 1);
  if (num_tiles > 0) {
    wgmma::mbar_wait(kv.k_full(stage_of(0)), phase_of(0));
    turn_begin();
    wgmma::fence();
    issue_qk(stage_of(0));
    turn_end(false);
    wgmma::wait<0>();
    wgmma::fence_regs(s);
    if constexpr (kMode != kResidentKeys) wgmma::mbar_arrive(kv.k_empty(stage_of(0)));
    float corr[2];
    softmax(0, corr);  // o is still zero: nothing to rescale
    pack_p();
  }
  // Tiles 0 .. n - 2: P V of tile t overlaps S and the softmax of tile t + 1. No branch around the
  // wgmma issues (ptxas serialises wgmma pipelines whose accumulators merge across branches).
  for (int t = 0; t + 1 < num_tiles; ++t) {
    const int cur = stage_of(t), next = stage_of(t + 1);
    wgmma::mbar_wait(kv.k_full(next), phase_of(t + 1));
    wgmma::mbar_wait(kv.v_full(cur), phase_of(t));
    turn_begin();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_qk(next);
    issue_pv(cur);
    turn_end(false);
    wgmma::wait<1>();  // S of tile t + 1; P V of tile t may still run
    wgmma::fence_regs(s);
    if constexpr (kMode != kResidentKeys) wgmma::mbar_arrive(kv.k_empty(next));
    float corr[2];
    softmax(t + 1, corr);
    wgmma::wait<0>();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    if constexpr (kMode != kResidentKeys) wgmma::mbar_arrive(kv.v_empty(cur));
#pragma unroll
    for (int i = 0; i < kOut; ++i) o[i] *= corr[(i >> 1) & 1];
    pack_p();
  }
  if (num_tiles > 0) {  // the last tile's P V
    const int last = num_tiles - 1;
    wgmma::mbar_wait(kv.v_full(stage_of(last)), phase_of(last));
    turn_begin();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_pv(stage_of(last));
    turn_end(true);
    wgmma::wait<0>();
    wgmma::fence_regs(o);
  }

  // Every product that reads Q has completed: the producer may load the next query tile.
  if constexpr (kMultiQ) wgmma::mbar_arrive(q_empty(qi));

  // Normalise, gate and store: this thread holds dims (8n + 2 c4, +1) of rows row_base (+8).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = mma::quad_sum(l_run[r]);
    const int64_t row = row_base + r * 8;
    if (row >= a.tq) continue;
    if constexpr (kSplit) {
      // This key range's share: the sums as they are, and the max the probabilities were taken
      // against (0 while every key was masked: l == 0 then). Unscaled: an all -FLT_MAX row's max
      // times the log2 factor would overflow to -inf.
      const int64_t part_row = (static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y) * a.tq + row;
      float* dst = a.part_o + part_row * kDim + 2 * c4;
#pragma unroll
      for (int n = 0; n < kDim / 8; ++n)
        *reinterpret_cast<float2*>(dst + n * 8) = make_float2(o[4 * n + 2 * r], o[4 * n + 2 * r + 1]);
      if (c4 == 0) a.part_ml[part_row] = make_float2(m_run[r] == -INFINITY ? 0.f : m_run[r], l);
      continue;
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;  // no attended key: zeros
    const int64_t dst = b * a.os[0] + h * a.os[1] + row * a.os[2] + 2 * c4;
#pragma unroll
    for (int n = 0; n < kDim / 8; ++n)
      a.store_pair(dst + n * 8, o[4 * n + 2 * r] * inv, o[4 * n + 2 * r + 1] * inv, gates[r]);
  }
  }  // query tiles
#else
  (void)a;  // no sm_90a image: the host never launches this (wgmma_attention_applies)
#endif
}

// Merges the key ranges of a split launch (one warp per query row; lane j holds dim pairs j,
// j + 32, ...): rescales each range's sums to the largest max, normalises, gates and stores as
// the unsplit kernel's epilogue.
template <int kDim>
__global__ void __launch_bounds__(256) wgmma_attention_merge_kernel(const WgmmaArgs a, int splits,
                                                                    int64_t rows, float sl) {
  const int64_t row_id = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (row_id >= rows) return;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t bh = row_id / a.tq, row = row_id % a.tq;
  const int64_t b = bh / a.heads, h = bh % a.heads;
  constexpr int kPairs = kDim / 64;  // dim pairs per lane
  // A range that attended some key (a NaN sum included, so NaN rows stay NaN as unsplit).
  const auto attended = [](float2 ml) { return ml.y > 0.f || ml.y != ml.y; };
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) {
    const float2 ml = a.part_ml[s * rows + row_id];
    if (attended(ml)) mx = fmaxf(mx, ml.x);
  }
  float l = 0.f, acc[kPairs][2] = {};
  for (int s = 0; s < splits; ++s) {
    const float2 ml = a.part_ml[s * rows + row_id];
    if (!attended(ml)) continue;  // nothing attended in this range: adds zeros
    const float w = exp2f((ml.x - mx) * sl);
    l = fmaf(ml.y, w, l);
    const float* src = a.part_o + (s * rows + row_id) * kDim;
#pragma unroll
    for (int j = 0; j < kPairs; ++j) {
      const float2 v = *reinterpret_cast<const float2*>(src + 2 * (lane + 32 * j));
      acc[j][0] = fmaf(v.x, w, acc[j][0]);
      acc[j][1] = fmaf(v.y, w, acc[j][1]);
    }
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;  // no attended key: zeros
  const float gate = a.gate_factor(b, h, row);
  const int64_t dst = b * a.os[0] + h * a.os[1] + row * a.os[2];
#pragma unroll
  for (int j = 0; j < kPairs; ++j)
    a.store_pair(dst + 2 * (lane + 32 * j), acc[j][0] * inv, acc[j][1] * inv, gate);
}

template <int kDim, bool kMasked, bool kSplit, int kMode>
void launch(const WgmmaMaps& maps, const WgmmaArgs& a, int64_t batch_heads, int splits,
            cudaStream_t stream) {
  constexpr size_t kSmem = smem_bytes<kDim>(q_buffers<kDim, kMode>());
  allow_dynamic_smem(reinterpret_cast<const void*>(wgmma_attention_kernel<kDim, kMasked, kSplit, kMode>),
                     kSmem);
  const int64_t q_tiles = query_tiles(a.tq);
  // A block per run of query tiles of one (batch, head) and key range.
  const int64_t per = a.q_tiles_per_block;
  const dim3 grid(static_cast<unsigned>((q_tiles + per - 1) / per), static_cast<unsigned>(batch_heads),
                  static_cast<unsigned>(splits));
  wgmma_attention_kernel<kDim, kMasked, kSplit, kMode><<<grid, kThreads, kSmem, stream>>>(maps, a);
  LTX_CUDA_CHECK_LAUNCH();
}

// launch<> with kMasked from the args' mask.
template <int kDim, bool kSplit, int kMode>
void launch_masked(const WgmmaMaps& maps, const WgmmaArgs& a, int64_t batch_heads, int splits,
                   cudaStream_t stream) {
  if (a.mask.kind != MaskKind::None) {
    launch<kDim, true, kSplit, kMode>(maps, a, batch_heads, splits, stream);
  } else {
    launch<kDim, false, kSplit, kMode>(maps, a, batch_heads, splits, stream);
  }
}

template <int kDim>
void launch_dim(const WgmmaMaps& maps, WgmmaArgs a, int64_t batch_heads, int splits, int device,
                cudaStream_t stream) {
  if (splits <= 1) {
    if (a.q_tiles_per_block > 1) {
      launch_masked<kDim, false, kResidentKeys>(maps, a, batch_heads, 1, stream);
    } else {
      launch_masked<kDim, false, kOneTile>(maps, a, batch_heads, 1, stream);
    }
    return;
  }
  // The ranges' partial results, from the caching allocator (stream-ordered: free once the merge
  // kernel queued behind the split launch has read them).
  const int64_t rows = batch_heads * a.tq;
  const Tensor part_o = Tensor::empty({splits, rows, kDim}, DType::F32, Device::cuda(device));
  const Tensor part_ml = Tensor::empty({splits, rows, 2}, DType::F32, Device::cuda(device));
  a.part_o = static_cast<float*>(const_cast<void*>(part_o.raw_data()));
  a.part_ml = static_cast<float2*>(const_cast<void*>(part_ml.raw_data()));
  launch_masked<kDim, true, kOneTile>(maps, a, batch_heads, splits, stream);
  const unsigned blocks = static_cast<unsigned>((rows + 7) / 8);
  const float sl = exp2_factor(a.mask.kind != MaskKind::None, a.scale);
  wgmma_attention_merge_kernel<kDim><<<blocks, 256, 0, stream>>>(a, splits, rows, sl);
  LTX_CUDA_CHECK_LAUNCH();
}

// The TMA map of a bf16 [B, H, T, D] operand (D 64 or 128, dense): dims (D, T, H, B), 64 x 128
// boxes with the 128-byte swizzle; rows past T read as zeros. A size-1 dim may carry any stride:
// it gets the packed one (TMA wants 16-byte multiples).
CUtensorMap tensor_map(const Tensor& t) {
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.size(3)),
                              static_cast<cuuint64_t>(std::max<int64_t>(t.size(2), 1)),
                              static_cast<cuuint64_t>(t.size(1)), static_cast<cuuint64_t>(t.size(0))};
  cuuint64_t strides[3];
  cuuint64_t packed = dims[0] * 2;
  for (int i = 0; i < 3; ++i) {
    const int dim = 2 - i;  // T, H, B
    strides[i] = t.size(dim) > 1 ? static_cast<cuuint64_t>(t.stride(dim)) * 2 : packed;
    packed = strides[i] * dims[i + 1];
  }
  const cuuint32_t box[4] = {64, kKeys, 1, 1};
  return bf16_swizzled_tensor_map(t.raw_data(), 4, dims, strides, box, "wgmma attention", t);
}

}  // namespace

bool wgmma_attention_available(int device) {
  static std::once_flag once[64];
  static bool available[64] = {};
  std::call_once(once[device % 64], [device] {
    if (compute_capability(device).major != 9) return;
    DeviceGuard guard(device);
    int image = 0;
    // Fails when the binary holds no image this device can load; then there is no kernel either.
    if (cudaMemcpyFromSymbol(&image, g_wgmma_image, sizeof image) != cudaSuccess) {
      (void)cudaGetLastError();
      image = 0;
    }
    available[device % 64] = image == 1;
  });
  return available[device % 64];
}

bool wgmma_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.dtype() != DType::BF16 || k.dtype() != DType::BF16 || v.dtype() != DType::BF16)
    return false;
  const int64_t d = q.size(3);
  if (v.size(3) != d || (d != 64 && d != 128)) return false;
  if (k.size(2) == 0) return false;  // no keys: the mma kernel writes the zeros
  if (q.size(0) * q.size(1) >= 65536) return false;  // grid.y
  if (!bf16_rows_loadable(q) || !bf16_rows_loadable(k) || !bf16_rows_loadable(v)) return false;
  // TMA strides: positive and below 2^40 bytes (a broadcast, stride-0 dim goes to the mma kernel).
  for (const Tensor* t : {&q, &k, &v}) {
    for (int i = 0; i < 3; ++i) {
      if (t->size(i) > 1 && (t->stride(i) <= 0 || t->stride(i) >= (int64_t{1} << 38))) return false;
    }
  }
  return wgmma_attention_available(q.device().index);
}

int wgmma_attention_auto_splits(const Tensor& q, const Tensor& k) {
  const int64_t blocks = query_tiles(q.size(2)) * q.size(0) * q.size(1);
  const int64_t tiles = key_tiles(k.size(2));
  const int64_t sms = multiprocessor_count(q.device().index);
  // Only when fewer than half the SMs would get a block (one block per SM fits) and every range
  // keeps at least 4 key tiles, so the merge stays a small fraction of the work.
  if (2 * blocks > sms || tiles < 8) return 1;
  return static_cast<int>(std::clamp<int64_t>(std::min(sms / blocks, tiles / 4), 1, 16));
}

int wgmma_attention_auto_q_tiles(const Tensor& q, const Tensor& k) {
  const int64_t q_tiles = query_tiles(q.size(2));
  const int64_t blocks = q_tiles * q.size(0) * q.size(1);
  const int64_t tiles = key_tiles(k.size(2));
  const int64_t sms = multiprocessor_count(q.device().index);
  // Keys that fit the stages, and at least two waves of blocks to fold into one: as many blocks
  // per (batch, head) as fit one wave, the query tiles dealt out evenly (a ragged last block
  // would add a second wave: 47 tiles a block take 0.174 ms on 24576 x 126, 48 0.151; RESULTS.md).
  // Streamed keys (more tiles) stay one tile a block (bench/RESULTS.md).
  if (tiles > kStages || blocks < 2 * sms) return 1;
  const int64_t per_head = std::max<int64_t>(1, sms / (q.size(0) * q.size(1)));
  return static_cast<int>((q_tiles + per_head - 1) / per_head);
}

void wgmma_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                     const Tensor& gate, float scale, Tensor& out, int kv_splits,
                     int q_tiles_per_block) {
  WgmmaMaps maps;
  maps.q = tensor_map(q);
  maps.k = tensor_map(k);
  maps.v = tensor_map(v);
  WgmmaArgs a;
  static_cast<FusedAttentionParams&>(a) = fused_attention_params(q, k, mask, gate, scale, out);
  const int64_t tiles = key_tiles(k.size(2));
  int splits = kv_splits > 0 ? kv_splits : wgmma_attention_auto_splits(q, k);
  LTX_CHECK(splits <= 65535, "wgmma attention: ", splits, " key splits are too many for one launch");
  // Equal ranges, none empty: ceil(tiles / splits) tiles each, and as many ranges as that needs.
  a.tiles_per_split = static_cast<int>(std::max<int64_t>(1, (tiles + splits - 1) / splits));
  splits = static_cast<int>(std::max<int64_t>(1, (tiles + a.tiles_per_split - 1) / a.tiles_per_split));
  a.q_tiles_per_block = splits > 1 ? 1
                        : q_tiles_per_block > 0 ? q_tiles_per_block
                                                : wgmma_attention_auto_q_tiles(q, k);
  LTX_CHECK(a.q_tiles_per_block == 1 || tiles <= kStages, "wgmma attention: q_tiles_per_block ",
            a.q_tiles_per_block, " needs keys resident in the ", kStages, " stages (Tk <= ",
            kStages * kKeys, "), got Tk ", k.size(2), "; pass 0 (Auto) or 1");
  const int64_t batch_heads = q.size(0) * q.size(1);
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t s = current_stream(dev).handle();
  if (q.size(3) == 64) {
    launch_dim<64>(maps, a, batch_heads, splits, dev, s);
  } else {
    launch_dim<128>(maps, a, batch_heads, splits, dev, s);
  }
}

}  // namespace ltx::cuda
