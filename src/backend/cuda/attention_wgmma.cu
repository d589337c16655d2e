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
// finish P.V of tile t. The softmax itself is attention_mma.cu's (the wgmma accumulator layout is
// the mma.sync one, repeated), probabilities rounded to bf16 for P.V.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "backend/cuda/attention.h"
#include "backend/cuda/attention_mask.cuh"
#include "backend/cuda/device.h"
#include "backend/cuda/mma_primitives.cuh"
#include "backend/cuda/stream.h"
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

// Besides the tensor maps, the kernel needs what every fused kernel does.
using WgmmaArgs = FusedAttentionParams;

template <int kDim>
constexpr uint32_t q_bytes() {
  return kRowsQ * kDim * 2;
}
template <int kDim>
constexpr uint32_t tile_bytes() {
  return kKeys * kDim * 2;
}
// The mbarriers: Q full, then the K / V ring's (wgmma::KvBarriers).
constexpr int kBarriers = 1 + wgmma::KvBarriers<kStages>::kCount;
// +1024: the dynamic shared memory is re-aligned to the 1024-byte swizzle atom.
template <int kDim>
constexpr size_t smem_bytes() {
  return q_bytes<kDim>() + 2 * kStages * tile_bytes<kDim>() + 8 * kBarriers + 1024;
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
    wgmma::wgmma_rs_m64n128k16_tb(o, p, desc);
  } else {
    wgmma::wgmma_rs_m64n64k16_tb(o, p, desc);
  }
}
#endif

template <int kDim, bool kMasked>
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
  const uint32_t q_smem = smem;
  const auto k_smem = [=](int stage) { return smem + kQBytes + stage * kTileBytes; };
  const auto v_smem = [=](int stage) { return smem + kQBytes + (kStages + stage) * kTileBytes; };
  const uint32_t bars = smem + kQBytes + 2 * kStages * kTileBytes;
  const uint32_t q_full = bars;
  const wgmma::KvBarriers<kStages> kv{bars + 8};

  const int bh = blockIdx.y;
  const int b = bh / a.heads, h = bh % a.heads;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kRowsQ;
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128;
  const int num_tiles = static_cast<int>((a.tk + kKeys - 1) / kKeys);

  if (tid == 0) {
    wgmma::mbar_init(q_full, 1);
    kv.init(kConsumerThreads);
    wgmma::mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // Producer: one thread issues every copy; stage t % kStages is refilled once both consumers
    // released its previous tile.
    wgmma::setmaxnreg_dec<24>();
    if (tid == 0) {
      // One K or V tile into `dst` once its stage is released (`empty` completed phase `parity`).
      const auto load_tile = [&](const CUtensorMap* map, uint32_t dst, uint32_t full, uint32_t empty,
                                 uint32_t parity, int key0) {
        wgmma::mbar_wait(empty, parity);
        wgmma::mbar_arrive_expect_tx(full, kTileBytes);
#pragma unroll
        for (int c = 0; c < kBlocks; ++c)
          wgmma::tma_load_4d(dst + c * (kKeys * 128), map, 64 * c, key0, h, b, full);
      };
      wgmma::mbar_arrive_expect_tx(q_full, kQBytes);
#pragma unroll
      for (int c = 0; c < kBlocks; ++c)
        wgmma::tma_load_4d(q_smem + c * (kRowsQ * 128), &maps.q, 64 * c, static_cast<int>(q0), h, b,
                           q_full);
      for (int t = 0; t < num_tiles; ++t) {
        const int stage = t % kStages;
        const uint32_t parity = ((t / kStages) & 1) ^ 1;
        const int key0 = t * kKeys;
        load_tile(&maps.k, k_smem(stage), kv.k_full(stage), kv.k_empty(stage), parity, key0);
        load_tile(&maps.v, v_smem(stage), kv.v_full(stage), kv.v_empty(stage), parity, key0);
      }
    }
    return;
  }
  wgmma::setmaxnreg_inc<240>();

  const int cw = wg - 1;  // consumer index
  const int warp = (tid % 128) / 32, lane = tid & 31;
  const int g = lane >> 2, c4 = lane & 3;  // accumulator coordinates: row group, column pair

  float o[kOut];
#pragma unroll
  for (int i = 0; i < kOut; ++i) o[i] = 0.f;
  float s[kS];
  uint32_t p[kPvSteps][4];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  // This thread's query rows: row_base and row_base + 8.
  const int64_t row_base = q0 + cw * 64 + warp * 16 + g;
  // Their gate factors, loaded now: at the store the logit's load latency would stall the
  // epilogue (measured +4 % on the video self-attention).
  float gates[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    gates[r] = row_base + r * 8 < a.tq ? a.gate_factor(b, h, row_base + r * 8) : 1.f;
  // exp(scale * (x - m)) = exp2(x * sl - m * sl); masked logits already carry the scale.
  const float sl = kMasked ? mma::kLog2e : a.scale * mma::kLog2e;

  // Pingpong: the two consumers take turns issuing their MMAs, so one's softmax runs while the
  // other's products keep the tensor cores busy (measured on the H200, 32 x 6144 x 6144, D 128:
  // 660 TFLOP/s with turns, 655 without; 6144 x 1024: 497 and 480). Consumer cw issues after
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
          q_smem + (kk / 4) * (kRowsQ * 128) + cw * (64 * 128) + col, 16, 1024);
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
    const int64_t key0 = t * int64_t{kKeys};
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
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < kS / 4; ++n) mx = fmaxf(mx, fmaxf(s[4 * n + 2 * r], s[4 * n + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run[r], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // all masked so far: p = 0
      corr[r] = mma::fast_exp2((m_run[r] - m_use) * sl);
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kS / 4; ++n) {
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          float& x = s[4 * n + e];
          // Masked: (x - m) first, so a row of -FLT_MAX biases is uniform, not inf - inf.
          x = kMasked ? mma::fast_exp2((x - m_use) * sl) : mma::fast_exp2(fmaf(x, sl, -m_use * sl));
          sum += x;
        }
      }
      l_run[r] = l_run[r] * corr[r] + sum;  // this lane's columns; the quad is summed at the end
      m_run[r] = m_new;
    }
  };
  // The probabilities as the A operand of P V: k-step j covers n-tiles 2j and 2j + 1 of S.
  const auto pack_p = [&] {
#pragma unroll
    for (int j = 0; j < kPvSteps; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) p[j][i] = mma::pack_bf16(s[8 * j + 2 * i], s[8 * j + 2 * i + 1]);
    }
  };

  wgmma::mbar_wait(q_full, 0);
  if (num_tiles > 0) {
    wgmma::mbar_wait(kv.k_full(0), 0);
    turn_begin();
    wgmma::fence();
    issue_qk(0);
    turn_end(false);
    wgmma::wait<0>();
    wgmma::fence_regs(s);
    wgmma::mbar_arrive(kv.k_empty(0));
    float corr[2];
    softmax(0, corr);  // o is still zero: nothing to rescale
    pack_p();
  }
  // Tiles 0 .. n - 2: P V of tile t overlaps S and the softmax of tile t + 1. No branch around the
  // wgmma issues (ptxas serialises wgmma pipelines whose accumulators merge across branches).
  for (int t = 0; t + 1 < num_tiles; ++t) {
    const int cur = t % kStages, next = (t + 1) % kStages;
    wgmma::mbar_wait(kv.k_full(next), ((t + 1) / kStages) & 1);
    wgmma::mbar_wait(kv.v_full(cur), (t / kStages) & 1);
    turn_begin();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_qk(next);
    issue_pv(cur);
    turn_end(false);
    wgmma::wait<1>();  // S of tile t + 1; P V of tile t may still run
    wgmma::fence_regs(s);
    wgmma::mbar_arrive(kv.k_empty(next));
    float corr[2];
    softmax(t + 1, corr);
    wgmma::wait<0>();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::mbar_arrive(kv.v_empty(cur));
#pragma unroll
    for (int i = 0; i < kOut; ++i) o[i] *= corr[(i >> 1) & 1];
    pack_p();
  }
  if (num_tiles > 0) {  // the last tile's P V
    const int last = num_tiles - 1;
    wgmma::mbar_wait(kv.v_full(last % kStages), (last / kStages) & 1);
    turn_begin();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_pv(last % kStages);
    turn_end(true);
    wgmma::wait<0>();
    wgmma::fence_regs(o);
  }

  // Normalise, gate and store: this thread holds dims (8n + 2 c4, +1) of rows row_base (+8).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int64_t row = row_base + r * 8;
    if (row >= a.tq) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;  // no attended key: zeros
    const int64_t dst = b * a.os[0] + h * a.os[1] + row * a.os[2] + 2 * c4;
#pragma unroll
    for (int n = 0; n < kDim / 8; ++n)
      a.store_pair(dst + n * 8, o[4 * n + 2 * r] * inv, o[4 * n + 2 * r + 1] * inv, gates[r]);
  }
#else
  (void)a;  // no sm_90a image: the host never launches this (wgmma_attention_applies)
#endif
}

template <int kDim, bool kMasked>
void launch(const WgmmaMaps& maps, const WgmmaArgs& a, int64_t batch_heads, int device,
            cudaStream_t stream) {
  static std::once_flag configured[64];
  constexpr size_t kSmem = smem_bytes<kDim>();
  std::call_once(configured[device % 64], [] {
    LTX_CUDA_CHECK(cudaFuncSetAttribute(wgmma_attention_kernel<kDim, kMasked>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmem)));
  });
  const dim3 grid(static_cast<unsigned>((a.tq + kRowsQ - 1) / kRowsQ),
                  static_cast<unsigned>(batch_heads));
  wgmma_attention_kernel<kDim, kMasked><<<grid, kThreads, kSmem, stream>>>(maps, a);
  LTX_CUDA_CHECK_LAUNCH();
}

template <int kDim>
void launch_dim(const WgmmaMaps& maps, const WgmmaArgs& a, int64_t batch_heads, int device,
                cudaStream_t stream) {
  if (a.mask.kind == MaskKind::None) {
    launch<kDim, false>(maps, a, batch_heads, device, stream);
  } else {
    launch<kDim, true>(maps, a, batch_heads, device, stream);
  }
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
  const cuuint32_t box[4] = {64, kKeys, 1, 1}, element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult r = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(t.raw_data()), dims, strides,
      box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  LTX_CHECK(r == CUDA_SUCCESS, "wgmma attention: cuTensorMapEncodeTiled failed (CUresult ",
            static_cast<int>(r), ") for ", t.describe());
  return map;
}

}  // namespace

// Declared in wgmma_primitives.cuh (shared with neighborhood_attention_wgmma.cu).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    LTX_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                    cudaEnableDefault, &found));
    LTX_CHECK(found == cudaDriverEntryPointSuccess && f != nullptr,
              "wgmma kernels: the CUDA driver has no cuTensorMapEncodeTiled (driver too old)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

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

void wgmma_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                     const Tensor& gate, float scale, Tensor& out) {
  WgmmaMaps maps;
  maps.q = tensor_map(q);
  maps.k = tensor_map(k);
  maps.v = tensor_map(v);
  const WgmmaArgs a = fused_attention_params(q, k, mask, gate, scale, out);
  const int64_t batch_heads = q.size(0) * q.size(1);
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t s = current_stream(dev).handle();
  if (q.size(3) == 64) {
    launch_dim<64>(maps, a, batch_heads, dev, s);
  } else {
    launch_dim<128>(maps, a, batch_heads, dev, s);
  }
}

}  // namespace ltx::cuda
