// Tensor-core 3-D neighborhood attention for bf16 q/k/v (natten.na3d semantics, see
// src/ops/neighborhood_attention.h; the dispatch is in neighborhood_attention.cu).
//
// A block of 8 warps owns a 4 x 4 x 8 (t, h, w) tile of queries of one (batch, head); each warp
// owns a 2 x 2 x 4 sub-tile = the 16 rows of one m16n8k16 MMA. The block streams the union of its
// queries' windows (a box) through shared memory in tiles of 64 keys, prefetched a few tiles
// ahead with cp.async. Keys are ordered in 2 x 2 x 2 groups, so that one group is one 8-key MMA column tile:
// a warp's own window union (12 x 12 x 14 keys for an 11^3 kernel) is covered by whole groups
// wherever the windows are centred, and the warp skips every group outside it (warp-uniform
// branches: no MMA, no exp). Groups inside every window of the warp's queries need no mask; the
// others are masked per element by the window rule. The online softmax and the P V product are
// those of attention_mma.cu (f32 accumulation, probabilities rounded to bf16 for P V).
//
// Efficiency for an 11^3 window in the interior: 1331 of the 2016 keys a warp scores are in the
// query's window (66%), against 1331 / 3528 for scoring the block's whole union.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "backend/cuda/attention.h"
#include "backend/cuda/device.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/mma_primitives.cuh"
#include "backend/cuda/neighborhood_attention.h"
#include "backend/cuda/neighborhood_window.cuh"
#include "backend/cuda/online_softmax.cuh"
#include "backend/cuda/stream.h"

namespace ltx::cuda {

namespace {

using namespace mma;

// Warp sub-tile (2, 2, 4) = 16 query rows: row m -> (m >> 3, (m >> 2) & 1, m & 3).
constexpr int kWarpT = 2, kWarpH = 2, kWarpW = 4;
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kRowsQ = kWarps * 16;
// Key groups (2 x 2 x 2 boxes; key n of a group -> (n >> 2, (n >> 1) & 1, n & 1)) of a block's
// union box at most: the group table and the warps' bitmasks live in shared memory.
constexpr int kMaxGroups = 1024;

// The 8 warps tile the block as 2 x 2 x 2 sub-tiles (a 4 x 4 x 8 query tile); a key tile is 8
// groups (64 keys). On the decoder's shapes 4 x 8 x 4 and 2 x 4 x 16 blocks and 16-group tiles
// come within 10% of it, none faster overall (bench/RESULTS.md).
constexpr int kArrT = 2, kArrH = 2, kArrW = 2, kGroups = 8;
// Key tiles in flight: the loop is bound by the latency of the K/V loads (little MMA work per tile
// once most groups are skipped), so they are prefetched kStages - 1 tiles ahead.
constexpr int kStages = 4;

struct NaMmaArgs {
  const __nv_bfloat16* q = nullptr;
  const __nv_bfloat16* k = nullptr;
  const __nv_bfloat16* v = nullptr;
  __nv_bfloat16* out = nullptr;        // contiguous [B, T, H, W, heads, D]
  int64_t qs[5] = {}, ks[5] = {}, vs[5] = {};  // strides of B, T, H, W, head (the dim is dense)
  int len[3] = {};                      // T, H, W
  int kern[3] = {};                     // clamped to the lengths
  int tiles[3] = {};                    // block tiles along t, h, w
  int heads = 0;
  float scale = 0.f;
};

// Group (gt, gh, gw) packed as bytes.
__device__ __forceinline__ int unpack(int packed, int d) { return (packed >> (8 * (2 - d))) & 0xff; }

template <int kDim>
__global__ void __launch_bounds__(kThreads, kDim <= 64 ? 2 : 1) na_mma_kernel(NaMmaArgs a) {
  constexpr int kChunks = kDim / 8;
  constexpr int kSteps = kDim / 16;    // k-steps of Q K^T
  constexpr int kOutTiles = kDim / 8;  // n-tiles of the output
  constexpr int kRowsK = kGroups * 8;  // keys per tile
  constexpr int kBlockT = kArrT * kWarpT, kBlockH = kArrH * kWarpH, kBlockW = kArrW * kWarpW;
  constexpr uint32_t kQBytes = kRowsQ * kDim * 2, kKvBytes = kRowsK * kDim * 2;
  constexpr int kWords = kMaxGroups / 32;
  static_assert(kArrT * kArrH * kArrW == kWarps && 32 % kGroups == 0);

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t q_smem = smem;
  const auto k_smem = [=](int i) { return smem + kQBytes + i * kKvBytes; };
  const auto v_smem = [=](int i) { return smem + kQBytes + (kStages + i) * kKvBytes; };
  // Per group: its coordinates (bytes 0-2: gw, gh, gt) and which of its 8 keys lie in the box
  // (byte 3), and the int32 offsets of its first key from the box origin in K and in V.
  int* group_table = reinterpret_cast<int*>(smem_raw + kQBytes + 2 * kStages * kKvBytes);
  int* group_koff = group_table + kMaxGroups;
  int* group_voff = group_koff + kMaxGroups;
  uint32_t* need_bits = reinterpret_cast<uint32_t*>(group_voff + kMaxGroups);  // [warp][word]
  uint32_t* full_bits = need_bits + kWarps * kWords;

  // Heads vary fastest: the blocks of one query tile run together and read each token's heads
  // (adjacent in memory) at about the same time.
  const int b = blockIdx.y, head = blockIdx.x % a.heads;
  int rest = blockIdx.x / a.heads;
  const int tile_w = rest % a.tiles[2];
  rest /= a.tiles[2];
  const int tile_h = rest % a.tiles[1], tile_t = rest / a.tiles[1];
  const int q0[3] = {tile_t * kBlockT, tile_h * kBlockH, tile_w * kBlockW};
  const int bdims[3] = {kBlockT, kBlockH, kBlockW};

  // The block's key box, in 2 x 2 x 2 groups (the last group of an odd axis half outside).
  int lo[3], union_hi[3], ng[3];
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    const AxisRange r = axis_range(q0[d], bdims[d], a.len[d], a.kern[d]);
    lo[d] = r.lo;
    union_hi[d] = r.hi;
    ng[d] = (r.hi - r.lo + 1) / 2;
  }
  // Rows of an even number of groups: the pairs of the P V product then never straddle two
  // rows (the padding groups are empty and never needed).
  ng[2] += ng[2] & 1;
  const int num_groups = ng[0] * ng[1] * ng[2];
  const int num_tiles = (num_groups + kGroups - 1) / kGroups;

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c4 = lane & 3;
  const int wq0[3] = {q0[0] + (warp / (kArrH * kArrW)) * kWarpT,
                      q0[1] + ((warp / kArrW) % kArrH) * kWarpH, q0[2] + (warp % kArrW) * kWarpW};
  const int wdims[3] = {kWarpT, kWarpH, kWarpW};
  bool warp_active = true;
  // Group-index ranges along each axis: [need_lo, need_hi) touch the warp's window union,
  // [full_lo, full_hi) lie inside every window of its queries.
  int need_lo[3], need_hi[3], full_lo[3], full_hi[3];
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    warp_active = warp_active && wq0[d] < a.len[d];
    const AxisRange r = axis_range(wq0[d], wdims[d], a.len[d], a.kern[d]);
    need_lo[d] = (r.lo - lo[d]) >> 1;
    need_hi[d] = (r.hi - lo[d] + 1) >> 1;
    full_lo[d] = (r.in_lo - lo[d] + 1) >> 1;
    full_hi[d] = (r.in_hi - lo[d]) >> 1;
  }

  // This lane's two query rows g (r = 0) and g + 8 (r = 1): (wq0 + (r, g >> 2, g & 3)), and
  // their window starts relative to the key box (positions clamped for rows past the volume;
  // those are never stored).
  int ws[2][3];
  bool row_valid[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int pos[3] = {wq0[0] + r, wq0[1] + (g >> 2), wq0[2] + (g & 3)};
    row_valid[r] = pos[0] < a.len[0] && pos[1] < a.len[1] && pos[2] < a.len[2];
#pragma unroll
    for (int d = 0; d < 3; ++d)
      ws[r][d] = window_start(min(pos[d], a.len[d] - 1), a.len[d], a.kern[d]) - lo[d];
  }

  const __nv_bfloat16* qb = a.q + b * a.qs[0] + head * a.qs[4];
  const __nv_bfloat16* kb = a.k + b * a.ks[0] + head * a.ks[4] + lo[0] * a.ks[1] +
                            lo[1] * a.ks[2] + lo[2] * a.ks[3];
  const __nv_bfloat16* vb = a.v + b * a.vs[0] + head * a.vs[4] + lo[0] * a.vs[1] +
                            lo[1] * a.vs[2] + lo[2] * a.vs[3];
  const int box[3] = {union_hi[0] - lo[0], union_hi[1] - lo[1], union_hi[2] - lo[2]};

  // Q rows of the block: row = 16 warp + m.
  for (int i = threadIdx.x; i < kRowsQ * kChunks; i += kThreads) {
    const int row = i / kChunks, c = i % kChunks, wi = row >> 4, m = row & 15;
    const int t = q0[0] + (wi / (kArrH * kArrW)) * kWarpT + (m >> 3);
    const int h = q0[1] + ((wi / kArrW) % kArrH) * kWarpH + ((m >> 2) & 1);
    const int w = q0[2] + (wi % kArrW) * kWarpW + (m & 3);
    const bool valid = t < a.len[0] && h < a.len[1] && w < a.len[2];
    const int64_t off = valid ? t * a.qs[1] + h * a.qs[2] + w * a.qs[3] + c * 8 : 0;
    cp_async_16(q_smem + swizzled<kChunks>(row, c), qb + off, valid);
  }
  // The group table, then each warp's need / full bitmasks (one ballot per 32 groups).
  for (int i = threadIdx.x; i < num_groups; i += kThreads) {
    const int gw = i % ng[2], r2 = i / ng[2], gh = r2 % ng[1], gt = r2 / ng[1];
    int inside = 0;
#pragma unroll
    for (int n = 0; n < 8; ++n)
      if (2 * gt + (n >> 2) < box[0] && 2 * gh + ((n >> 1) & 1) < box[1] && 2 * gw + (n & 1) < box[2])
        inside |= 1 << n;
    group_table[i] = (inside << 24) | (gt << 16) | (gh << 8) | gw;
    group_koff[i] = static_cast<int>(2 * (gt * a.ks[1] + gh * a.ks[2] + gw * a.ks[3]));
    group_voff[i] = static_cast<int>(2 * (gt * a.vs[1] + gh * a.vs[2] + gw * a.vs[3]));
  }
  __syncthreads();
  for (int base = 0; base < num_groups; base += 32) {
    const int i = base + lane;
    bool need = warp_active && i < num_groups, full = need;
    if (i < num_groups) {
      const int packed = group_table[i];
#pragma unroll
      for (int d = 0; d < 3; ++d) {
        const int c = unpack(packed, d);
        need = need && c >= need_lo[d] && c < need_hi[d];
        full = full && c >= full_lo[d] && c < full_hi[d];
      }
    }
    const uint32_t nb = __ballot_sync(0xffffffffu, need), fb = __ballot_sync(0xffffffffu, full);
    if (lane == 0) {
      need_bits[warp * kWords + base / 32] = nb;
      full_bits[warp * kWords + base / 32] = fb;
    }
  }
  __syncthreads();

  // K and V rows of key tile `tile` (keys outside the box or past the last group: zeros). The
  // thread's 16-byte chunks keep their column c and key n (of its group) from tile to tile:
  // chunk i = tid + kThreads * s is row r = tid / kChunks + s * kThreads / kChunks.
  constexpr int kLoads = kRowsK * kChunks / kThreads;
  static_assert(kLoads >= 1 && (kThreads / kChunks) % 8 == 0);
  const int ld_c = threadIdx.x % kChunks, ld_row = threadIdx.x / kChunks, ld_n = ld_row & 7;
  const int64_t ld_koff = (ld_n >> 2) * a.ks[1] + ((ld_n >> 1) & 1) * a.ks[2] + (ld_n & 1) * a.ks[3] +
                          ld_c * 8;
  const int64_t ld_voff = (ld_n >> 2) * a.vs[1] + ((ld_n >> 1) & 1) * a.vs[2] + (ld_n & 1) * a.vs[3] +
                          ld_c * 8;
  const auto load_kv = [&](int tile, int buf) {
#pragma unroll
    for (int s = 0; s < kLoads; ++s) {
      const int r = ld_row + s * (kThreads / kChunks);
      const int group = tile * kGroups + (r >> 3);
      const int gi = min(group, num_groups - 1);
      const bool valid = group < num_groups && ((group_table[gi] >> (24 + ld_n)) & 1);
      const __nv_bfloat16* ks = valid ? kb + group_koff[gi] + ld_koff : kb;
      const __nv_bfloat16* vs = valid ? vb + group_voff[gi] + ld_voff : vb;
      cp_async_16(k_smem(buf) + swizzled<kChunks>(r, ld_c), ks, valid);
      cp_async_16(v_smem(buf) + swizzled<kChunks>(r, ld_c), vs, valid);
    }
  };
  // Tiles 0 .. kStages - 2 in flight before the loop (one commit group each, empty past the end,
  // so that group i is always tile i); Q rides in group 0.
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < num_tiles) load_kv(st, st);
    cp_async_commit();
  }

  const int lm_row = lane & 7, lm_mat = lane >> 3;
  uint32_t qf[kSteps][4];
  float o[kOutTiles][4];
#pragma unroll
  for (int t = 0; t < kOutTiles; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  const float sl = a.scale * kLog2e;

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int buf = tile % kStages;
    cp_async_wait<kStages - 2>();  // group `tile` has landed
    __syncthreads();  // ... for every thread; and every warp is done with the previous buffer
    {
      const int next = tile + kStages - 1;  // into the buffer the previous iteration read
      if (next < num_tiles) load_kv(next, next % kStages);
      cp_async_commit();
    }

    if (tile == 0) {
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        const int r = warp * 16 + lm_row + (lm_mat & 1) * 8;
        ldmatrix_x4(q_smem + swizzled<kChunks>(r, 2 * s + (lm_mat >> 1)), qf[s]);
      }
    }

    const int bit0 = tile * kGroups;
    const uint32_t need = (need_bits[warp * kWords + bit0 / 32] >> (bit0 % 32)) &
                          ((kGroups == 32 ? 0u : (1u << kGroups)) - 1u);
    const uint32_t full = full_bits[warp * kWords + bit0 / 32] >> (bit0 % 32);

    if (need != 0) {
      // One branch per group (warp-uniform): a group outside the warp's window union costs
      // nothing. (Whole quads of groups, for more independent MMAs, are slower: bench/RESULTS.md.)
      float sc[kGroups][4];
#pragma unroll
      for (int t = 0; t < kGroups; ++t) {
        sc[t][0] = sc[t][1] = sc[t][2] = sc[t][3] = 0.f;
        if (!((need >> t) & 1u)) continue;
#pragma unroll
        for (int s2 = 0; s2 < kSteps / 2; ++s2) {
          uint32_t kf[4];
          ldmatrix_x4(k_smem(buf) + swizzled<kChunks>(t * 8 + lm_row, 4 * s2 + lm_mat), kf);
          mma_bf16(sc[t], qf[2 * s2], kf[0], kf[1]);
          mma_bf16(sc[t], qf[2 * s2 + 1], kf[2], kf[3]);
        }
        if ((full >> t) & 1u) continue;
        // Element e: row r = e >> 1, key n = 2 c4 + (e & 1) -> offsets (c4 >> 1, c4 & 1, e & 1).
        const int packed = group_table[bit0 + t];
        const int kt = 2 * unpack(packed, 0) + (c4 >> 1), kh = 2 * unpack(packed, 1) + (c4 & 1),
                  kw = 2 * unpack(packed, 2);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const bool th =
              static_cast<unsigned>(kt - ws[r][0]) < static_cast<unsigned>(a.kern[0]) &&
              static_cast<unsigned>(kh - ws[r][1]) < static_cast<unsigned>(a.kern[1]);
#pragma unroll
          for (int e1 = 0; e1 < 2; ++e1) {
            const bool ok = th && static_cast<unsigned>(kw + e1 - ws[r][2]) <
                                      static_cast<unsigned>(a.kern[2]);
            if (!ok) sc[t][2 * r + e1] = -INFINITY;
          }
        }
      }

      // Online softmax over the needed groups (the others contribute p = 0).
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m_old = m_run[r];
        const float corr = online_softmax_row<false>(m_run[r], l_run[r], sl, true, [&](auto&& f) {
#pragma unroll
          for (int t = 0; t < kGroups; ++t)
            if ((need >> t) & 1u) f(sc[t][2 * r], sc[t][2 * r + 1]);
        });
        // Rescale the accumulator only when some row of the warp has a new maximum (exact: corr
        // is 1 otherwise); late tiles rarely raise it.
        if (__any_sync(0xffffffffu, m_run[r] != m_old)) {
#pragma unroll
          for (int t = 0; t < kOutTiles; ++t) {
            o[t][2 * r] *= corr;
            o[t][2 * r + 1] *= corr;
          }
        }
      }

      // O += P V over pairs of groups (one k16 step each).
#pragma unroll
      for (int j = 0; j < kGroups / 2; ++j) {
        if (!((need >> (2 * j)) & 3u)) continue;
        uint32_t pf[4];
        pf[0] = pack_bf16(sc[2 * j][0], sc[2 * j][1]);
        pf[1] = pack_bf16(sc[2 * j][2], sc[2 * j][3]);
        pf[2] = pack_bf16(sc[2 * j + 1][0], sc[2 * j + 1][1]);
        pf[3] = pack_bf16(sc[2 * j + 1][2], sc[2 * j + 1][3]);
#pragma unroll
        for (int dp = 0; dp < kOutTiles / 2; ++dp) {
          uint32_t vf[4];
          const int r = j * 16 + lm_row + (lm_mat & 1) * 8, ch = 2 * dp + (lm_mat >> 1);
          ldmatrix_x4_trans(v_smem(buf) + swizzled<kChunks>(r, ch), vf);
          mma_bf16(o[2 * dp], pf, vf[0], vf[1]);
          mma_bf16(o[2 * dp + 1], pf, vf[2], vf[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // Normalise and store: lane holds dims (8 t + 2 c4, +1) of its rows.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = quad_sum(l_run[r]);
    if (!row_valid[r]) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int t = wq0[0] + r, h = wq0[1] + (g >> 2), w = wq0[2] + (g & 3);
    const int64_t row = (((static_cast<int64_t>(b) * a.len[0] + t) * a.len[1] + h) * a.len[2] + w) *
                            a.heads + head;
    __nv_bfloat16* dst = a.out + row * kDim + 2 * c4;
#pragma unroll
    for (int t8 = 0; t8 < kOutTiles; ++t8)
      *reinterpret_cast<uint32_t*>(dst + t8 * 8) =
          pack_bf16(o[t8][2 * r] * inv, o[t8][2 * r + 1] * inv);
  }
}

template <int kDim>
constexpr size_t smem_bytes() {
  return static_cast<size_t>(kRowsQ + 2 * kStages * kGroups * 8) * kDim * 2 +
         sizeof(int) * (3 * kMaxGroups + 2 * kWarps * (kMaxGroups / 32));
}

template <int kDim>
void launch(const NaMmaArgs& a, int64_t batch, cudaStream_t stream) {
  constexpr size_t kSmem = smem_bytes<kDim>();
  allow_dynamic_smem(reinterpret_cast<const void*>(na_mma_kernel<kDim>), kSmem);
  NaMmaArgs args = a;
  const int bdims[3] = {kArrT * kWarpT, kArrH * kWarpH, kArrW * kWarpW};
  int64_t tiles = 1;
  for (int d = 0; d < 3; ++d) {
    args.tiles[d] = (a.len[d] + bdims[d] - 1) / bdims[d];
    tiles *= args.tiles[d];
  }
  LTX_CHECK(tiles * a.heads < (int64_t{1} << 31), "neighborhood_attention_3d: ", tiles, " x ",
            a.heads, " (query tiles x heads) do not fit one CUDA launch");
  const dim3 grid(static_cast<unsigned>(tiles * a.heads), static_cast<unsigned>(batch));
  na_mma_kernel<kDim><<<grid, kThreads, kSmem, stream>>>(args);
  LTX_CUDA_CHECK_LAUNCH();
}

// Whether the largest key box a block can see (block tile + kernel - 1 per axis) fits the group
// table (and its per-axis group counts fit a byte).
// table (and its per-axis group counts fit a byte), and every key offset inside the box fits the
// table's int32 element offsets.
bool groups_fit(const Tensor& q, const Tensor& k, const Tensor& v,
                const std::array<int64_t, 3>& kernel) {
  const int64_t bd[3] = {kArrT * kWarpT, kArrH * kWarpH, kArrW * kWarpW};
  int64_t groups = 1, kspan = 0, vspan = 0;
  for (int d = 0; d < 3; ++d) {
    const int64_t kd = std::min(kernel[d], q.size(1 + d));
    const int64_t extent = std::min(bd[d] + kd - 1, q.size(1 + d));
    int64_t n = (extent + 1) / 2;
    if (d == 2) n += n & 1;
    if (n > 255) return false;
    groups *= n;
    kspan += (2 * n) * k.stride(1 + d);
    vspan += (2 * n) * v.stride(1 + d);
  }
  return groups <= kMaxGroups && kspan < INT32_MAX && vspan < INT32_MAX;
}

}  // namespace

bool tensor_core_neighborhood_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v,
                                                const std::array<int64_t, 3>& kernel) {
  if (q.dtype() != DType::BF16 || k.dtype() != DType::BF16 || v.dtype() != DType::BF16)
    return false;
  const int64_t d = q.size(5);
  if (v.size(5) != d || (d != 32 && d != 64 && d != 128)) return false;
  if (q.size(0) >= 65536) return false;  // grid.y
  for (int i = 1; i < 4; ++i)
    if (q.size(i) >= (int64_t{1} << 24)) return false;
  if (!bf16_rows_loadable(q) || !bf16_rows_loadable(k) || !bf16_rows_loadable(v)) return false;
  if (!groups_fit(q, k, v, kernel)) return false;
  return compute_capability(q.device().index).major >= 8;
}

void tensor_core_neighborhood_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                        const std::array<int64_t, 3>& kernel, float scale,
                                        Tensor& out) {
  NaMmaArgs a;
  a.q = static_cast<const __nv_bfloat16*>(q.raw_data());
  a.k = static_cast<const __nv_bfloat16*>(k.raw_data());
  a.v = static_cast<const __nv_bfloat16*>(v.raw_data());
  a.out = static_cast<__nv_bfloat16*>(out.raw_data());
  for (int i = 0; i < 5; ++i) {
    a.qs[i] = q.stride(i);
    a.ks[i] = k.stride(i);
    a.vs[i] = v.stride(i);
  }
  for (int d = 0; d < 3; ++d) {
    a.len[d] = static_cast<int>(q.size(1 + d));
    a.kern[d] = static_cast<int>(std::min(kernel[d], q.size(1 + d)));
  }
  a.heads = static_cast<int>(q.size(4));
  a.scale = scale;
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t s = current_stream(dev).handle();
  const int64_t batch = q.size(0);
  switch (q.size(5)) {
    case 32: launch<32>(a, batch, s); break;
    case 128: launch<128>(a, batch, s); break;
    default: launch<64>(a, batch, s); break;
  }
}

}  // namespace ltx::cuda
