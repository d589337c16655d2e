// Tensor-core flash attention for bf16 q/k/v (see attention.h for the contract).
//
// One block of 8 warps owns 128 query rows of one (batch, head); each warp owns 16 rows (the kernel
// also takes 32 rows per warp, see kRowTiles). Keys and
// values stream through shared memory 64 rows at a time, double buffered with cp.async. Per tile a
// warp computes S = Q K^T (16 x 64) with mma.sync m16n8k16 (bf16 in, f32 accumulate), updates the
// online softmax in registers (the rows of the MMA accumulator are spread over the 4 lanes of a
// quad, so row reductions are two shuffles), turns the probabilities into the A operand of the
// next MMA without touching shared memory, and accumulates O += P V. Shared-memory rows are
// XOR-swizzled in 16-byte chunks so ldmatrix reads are free of bank conflicts.
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/attention.h"
#include "backend/cuda/attention_mask.cuh"
#include "backend/cuda/device.h"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/mma_primitives.cuh"
#include "backend/cuda/online_softmax.cuh"
#include "backend/cuda/stream.h"

namespace ltx::cuda {

namespace {

using namespace mma;

constexpr int kRowsK = 64;  // keys per tile

struct MmaArgs : FusedAttentionParams {
  const __nv_bfloat16* q = nullptr;
  const __nv_bfloat16* k = nullptr;
  const __nv_bfloat16* v = nullptr;
  int64_t qs[3] = {}, ks[3] = {}, vs[3] = {};  // strides of B, H, T (the head dim is dense)
};

// Loads `rows` rows of D bf16 starting at row r0 of one (b, h) slice into swizzled shared memory;
// rows at or past `limit` are zero-filled.
template <int kDim, int kRows, int kThreads>
__device__ __forceinline__ void load_tile(uint32_t smem, const __nv_bfloat16* base, int64_t row_stride,
                                          int64_t r0, int64_t limit) {
  constexpr int kChunks = kDim / 8;
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int64_t row = r0 + r;
    const bool valid = row < limit;
    const __nv_bfloat16* src = valid ? base + row * row_stride + c * 8 : base;
    cp_async_16(smem + swizzled<kChunks>(r, c), src, valid);
  }
}

// kM = 16-row MMA tiles per warp. kM == 1 keeps the warp's Q fragments in registers (D <= 128);
// kM == 2 or D 256 reload them from shared memory per k-step (registers go to the second accumulator set) and
// reuses every K and V fragment for both row tiles, halving shared-memory reads per MMA.
template <int kDim, bool kMasked, int kWarps, int kM>
__global__ void __launch_bounds__(kWarps * 32, 1) mma_attention_kernel(MmaArgs a) {
  constexpr int kThreads = kWarps * 32;
  constexpr int kWarpRows = 16 * kM;
  constexpr int kRowsQ = kWarps * kWarpRows;  // query rows per block
  constexpr int kChunks = kDim / 8;
  constexpr int kSteps = kDim / 16;      // k-steps of the QK^T product
  constexpr int kOutTiles = kDim / 8;    // n-tiles of the output
  constexpr int kKeyTiles = kRowsK / 8;  // n-tiles of S
  constexpr bool kQInRegs = kM == 1 && kDim <= 128;  // D 256: Q fragments from shared memory
  constexpr uint32_t kQBytes = kRowsQ * kDim * 2, kKvBytes = kRowsK * kDim * 2;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t q_smem = smem;
  // Buffer i of K at k_smem(i), of V at v_smem(i) (arithmetic, not arrays: no local memory).
  const auto k_smem = [=](int i) { return smem + kQBytes + i * kKvBytes; };
  const auto v_smem = [=](int i) { return smem + kQBytes + (2 + i) * kKvBytes; };

  const int bh = blockIdx.y;
  const int b = bh / a.heads, h = bh % a.heads;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kRowsQ;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c4 = lane & 3;  // MMA fragment coordinates: row group, column pair

  const __nv_bfloat16* qb = a.q + b * a.qs[0] + h * a.qs[1];
  const __nv_bfloat16* kb = a.k + b * a.ks[0] + h * a.ks[1];
  const __nv_bfloat16* vb = a.v + b * a.vs[0] + h * a.vs[1];
  const int num_tiles = static_cast<int>((a.tk + kRowsK - 1) / kRowsK);

  load_tile<kDim, kRowsQ, kThreads>(q_smem, qb, a.qs[2], q0, a.tq);
  load_tile<kDim, kRowsK, kThreads>(k_smem(0), kb, a.ks[2], 0, a.tk);
  load_tile<kDim, kRowsK, kThreads>(v_smem(0), vb, a.vs[2], 0, a.tk);
  cp_async_commit();

  // ldmatrix lane roles: lane l addresses row (l % 8) of 8x8 matrix (l / 8).
  const int lm_row = lane & 7, lm_mat = lane >> 3;
  // A fragment of Q rows [warp rows + 16 mi, +16), dims [16 s, +16).
  const auto q_frag_addr = [&](int mi, int s) {
    const int r = warp * kWarpRows + mi * 16 + lm_row + (lm_mat & 1) * 8;
    return q_smem + swizzled<kChunks>(r, 2 * s + (lm_mat >> 1));
  };

  uint32_t qf[kQInRegs ? kSteps : 1][4];
  float o[kM][kOutTiles][4];
#pragma unroll
  for (int mi = 0; mi < kM; ++mi)
#pragma unroll
    for (int t = 0; t < kOutTiles; ++t) o[mi][t][0] = o[mi][t][1] = o[mi][t][2] = o[mi][t][3] = 0.f;
  float m_run[kM][2], l_run[kM][2];
#pragma unroll
  for (int mi = 0; mi < kM; ++mi) {
    m_run[mi][0] = m_run[mi][1] = -INFINITY;
    l_run[mi][0] = l_run[mi][1] = 0.f;
  }

  // This lane's query rows: row_base + 16 mi + 8 r for r in {0, 1}, and their gate factors,
  // loaded now (as the wgmma kernel does): at the store the logit's load latency would stall it.
  const int64_t row_base = q0 + warp * kWarpRows + g;
  float gates[kM][2];
#pragma unroll
  for (int mi = 0; mi < kM; ++mi)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = row_base + mi * 16 + r * 8;
      gates[mi][r] = row < a.tq ? a.gate_factor(b, h, row) : 1.f;
    }

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < num_tiles) {
      const int64_t next = (tile + 1) * int64_t{kRowsK};
      load_tile<kDim, kRowsK, kThreads>(k_smem(buf ^ 1), kb, a.ks[2], next, a.tk);
      load_tile<kDim, kRowsK, kThreads>(v_smem(buf ^ 1), vb, a.vs[2], next, a.tk);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    if constexpr (kQInRegs) {
      if (tile == 0) {
#pragma unroll
        for (int s = 0; s < kSteps; ++s) ldmatrix_x4(q_frag_addr(0, s), qf[s]);
      }
    }

    // S = Q K^T for kWarpRows rows x 64 keys. k-steps outermost: the MMAs of a step are
    // independent, so they pipeline.
    float sc[kM][kKeyTiles][4];
#pragma unroll
    for (int mi = 0; mi < kM; ++mi)
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) sc[mi][t][0] = sc[mi][t][1] = sc[mi][t][2] = sc[mi][t][3] = 0.f;
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      uint32_t qa[kM][4];
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
        if constexpr (kQInRegs) {
#pragma unroll
          for (int i = 0; i < 4; ++i) qa[mi][i] = qf[kQInRegs ? s : 0][i];
        } else {
          ldmatrix_x4(q_frag_addr(mi, s), qa[mi]);
        }
      }
      // All K fragments of the step first, then the kM * 8 independent MMAs back to back (one
      // load per MMA pair is ~13% slower for kM == 1, bench/RESULTS.md).
      uint32_t kf[kKeyTiles / 2][4];
#pragma unroll
      for (int np = 0; np < kKeyTiles / 2; ++np) {
        const int r = np * 16 + lm_row + (lm_mat >> 1) * 8, ch = 2 * s + (lm_mat & 1);
        ldmatrix_x4(k_smem(buf) + swizzled<kChunks>(r, ch), kf[np]);
      }
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
#pragma unroll
        for (int np = 0; np < kKeyTiles / 2; ++np) {
          mma_bf16(sc[mi][2 * np], qa[mi], kf[np][0], kf[np][1]);
          mma_bf16(sc[mi][2 * np + 1], qa[mi], kf[np][2], kf[np][3]);
        }
      }
    }

    // Masked: scale and mask the logits here; they stay in the natural-log domain until the max
    // is subtracted, so finite -FLT_MAX padding biases behave as in torch (a row of them is
    // uniform, not empty). Unmasked: the raw scores go on (the scale is folded into one FMA per
    // element below); only keys past Tk are cut.
    const int64_t key0 = tile * int64_t{kRowsK};
    const bool edge = key0 + kRowsK > a.tk;
    if (kMasked || edge) {
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
#pragma unroll
        for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float x = kMasked ? sc[mi][t][e] * a.scale : sc[mi][t][e];
            const int64_t key = key0 + t * 8 + 2 * c4 + (e & 1);
            if constexpr (kMasked) {
              const int64_t row = row_base + mi * 16 + (e >> 1) * 8;
              if (key < a.tk && row < a.tq) x = a.mask.apply(x, b, h, row, key);
            }
            if (key >= a.tk) x = -INFINITY;
            sc[mi][t][e] = x;
          }
        }
      }
    }

    // Online softmax: per row tile, rows g (elements 0, 1) and g + 8 (elements 2, 3).
    // exp(scale * (s - m)) = exp2(s * sl - m * sl), sl = scale * log2(e) (masked: log2(e), the
    // scale is already in).
    const float sl = kMasked ? kLog2e : a.scale * kLog2e;
#pragma unroll
    for (int mi = 0; mi < kM; ++mi) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float corr =
            online_softmax_row<kMasked>(m_run[mi][r], l_run[mi][r], sl, true, [&](auto&& f) {
#pragma unroll
              for (int t = 0; t < kKeyTiles; ++t) f(sc[mi][t][2 * r], sc[mi][t][2 * r + 1]);
            });
#pragma unroll
        for (int t = 0; t < kOutTiles; ++t) {
          o[mi][t][2 * r] *= corr;
          o[mi][t][2 * r + 1] *= corr;
        }
      }
    }

    // O += P V: the S accumulators of key tiles 2j, 2j + 1 are the A fragment of k-step j.
#pragma unroll
    for (int j = 0; j < kRowsK / 16; ++j) {
      uint32_t pf[kM][4];
#pragma unroll
      for (int mi = 0; mi < kM; ++mi) {
        pf[mi][0] = pack_bf16(sc[mi][2 * j][0], sc[mi][2 * j][1]);
        pf[mi][1] = pack_bf16(sc[mi][2 * j][2], sc[mi][2 * j][3]);
        pf[mi][2] = pack_bf16(sc[mi][2 * j + 1][0], sc[mi][2 * j + 1][1]);
        pf[mi][3] = pack_bf16(sc[mi][2 * j + 1][2], sc[mi][2 * j + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kOutTiles / 2; ++dp) {
        uint32_t vf[4];
        const int r = j * 16 + lm_row + (lm_mat & 1) * 8, ch = 2 * dp + (lm_mat >> 1);
        ldmatrix_x4_trans(v_smem(buf) + swizzled<kChunks>(r, ch), vf);
#pragma unroll
        for (int mi = 0; mi < kM; ++mi) {
          mma_bf16(o[mi][2 * dp], pf[mi], vf[0], vf[1]);
          mma_bf16(o[mi][2 * dp + 1], pf[mi], vf[2], vf[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's prefetch overwrites this buffer
  }
  cp_async_wait<0>();  // Tk == 0: the first tile's copies were never waited for

  // Normalise, gate and store: lane holds dims (8t + 2 c4, +1) of its rows.
#pragma unroll
  for (int mi = 0; mi < kM; ++mi) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float l = quad_sum(l_run[mi][r]);
      const int64_t row = row_base + mi * 16 + r * 8;
      if (row >= a.tq) continue;
      const float inv = l > 0.f ? 1.f / l : 0.f;  // no attended key: zeros
      const int64_t dst = b * a.os[0] + h * a.os[1] + row * a.os[2] + 2 * c4;
#pragma unroll
      for (int t = 0; t < kOutTiles; ++t)
        a.store_pair(dst + t * 8, o[mi][t][2 * r] * inv, o[mi][t][2 * r + 1] * inv, gates[mi][r]);
    }
  }
}

template <int kDim, int kWarps, int kM>
constexpr size_t smem_bytes() {
  return static_cast<size_t>(kWarps * 16 * kM + 4 * kRowsK) * kDim * 2;
}

template <int kDim, bool kMasked, int kWarps, int kM>
void launch_one(const MmaArgs& a, int64_t batch_heads, cudaStream_t stream) {
  constexpr size_t kSmem = smem_bytes<kDim, kWarps, kM>();
  allow_dynamic_smem(reinterpret_cast<const void*>(mma_attention_kernel<kDim, kMasked, kWarps, kM>),
                     kSmem);
  constexpr int kRowsQ = kWarps * 16 * kM;
  const dim3 grid(static_cast<unsigned>((a.tq + kRowsQ - 1) / kRowsQ),
                  static_cast<unsigned>(batch_heads));
  mma_attention_kernel<kDim, kMasked, kWarps, kM><<<grid, kWarps * 32, kSmem, stream>>>(a);
  LTX_CUDA_CHECK_LAUNCH();
}

// Block shape (32 heads x 6144 x 6144, D 128, TFLOP/s on an H200; bench/RESULTS.md): 8 warps x 1
// row tile 230, 8 x 2 232 (with register spills), 4 x 2 221, 4 x 1 181. Hence 8 warps x 1 row tile.
constexpr int kBlockWarps = 8, kRowTiles = 1;

template <int kDim>
void launch(const MmaArgs& a, int64_t batch_heads, cudaStream_t stream) {
  if (a.mask.kind == MaskKind::None) {
    launch_one<kDim, false, kBlockWarps, kRowTiles>(a, batch_heads, stream);
  } else {
    launch_one<kDim, true, kBlockWarps, kRowTiles>(a, batch_heads, stream);
  }
}

}  // namespace

bool bf16_rows_loadable(const Tensor& t) {
  // cp.async moves 16-byte chunks: the last dim must be dense and every row start 16-byte aligned.
  const int last = t.dim() - 1;
  if (last < 0 || t.stride(last) != 1) return false;
  for (int i = 0; i < last; ++i)
    if (t.size(i) > 1 && t.stride(i) % 8 != 0) return false;
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0;
}

bool tensor_core_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (q.dtype() != DType::BF16 || k.dtype() != DType::BF16 || v.dtype() != DType::BF16)
    return false;
  const int64_t d = q.size(3);
  if (v.size(3) != d || (d != 32 && d != 64 && d != 128 && d != 256)) return false;
  if (q.size(0) * q.size(1) >= 65536) return false;  // grid.y
  if (!bf16_rows_loadable(q) || !bf16_rows_loadable(k) || !bf16_rows_loadable(v)) return false;
  return compute_capability(q.device().index).major >= 8;
}

void tensor_core_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                           const Tensor& gate, float scale, Tensor& out) {
  MmaArgs a;
  static_cast<FusedAttentionParams&>(a) = fused_attention_params(q, k, mask, gate, scale, out);
  a.q = static_cast<const __nv_bfloat16*>(q.raw_data());
  a.k = static_cast<const __nv_bfloat16*>(k.raw_data());
  a.v = static_cast<const __nv_bfloat16*>(v.raw_data());
  for (int i = 0; i < 3; ++i) {
    a.qs[i] = q.stride(i);
    a.ks[i] = k.stride(i);
    a.vs[i] = v.stride(i);
  }
  const int64_t batch_heads = q.size(0) * q.size(1);
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t s = current_stream(dev).handle();
  switch (q.size(3)) {
    case 32: launch<32>(a, batch_heads, s); break;
    case 64: launch<64>(a, batch_heads, s); break;
    case 256: launch<256>(a, batch_heads, s); break;
    default: launch<128>(a, batch_heads, s); break;
  }
}

}  // namespace ltx::cuda
