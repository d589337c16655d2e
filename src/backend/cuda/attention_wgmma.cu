// Hopper (sm_90a) flash attention for bf16 q/k/v with warpgroup MMAs (see attention.h for the
// contract).
//
// A block of two warpgroups owns 128 query rows of one (batch, head), each warpgroup 64. Q stays in
// shared memory; keys and values stream through it 128 rows at a time in three stages loaded with
// cp.async (rows past Tk zero-filled), all tiles in the 128-byte swizzle layout the tensor cores read
// through matrix descriptors. Per key tile a warpgroup issues S = Q K^T (wgmma m64n128k16, both
// operands from shared memory, K-major) and O += P V (m64nDk16, P from registers, V from shared
// memory through the transposed "MN-major" descriptor, so V needs no transposed copy). The two
// products of neighbouring tiles overlap: S of tile t + 1 and P.V of tile t are in flight together,
// and the online softmax of tile t + 1 runs on the CUDA cores while the tensor cores finish P.V of
// tile t. The softmax itself is the one of attention_mma.cu (the wgmma accumulator layout is the
// mma.sync one, repeated), probabilities rounded to bf16 for P.V.
#include <cuda_bf16.h>

#include <cstdint>
#include <mutex>

#include "backend/cuda/attention.h"
#include "backend/cuda/attention_mask.cuh"
#include "backend/cuda/device.h"
#include "backend/cuda/mma_primitives.cuh"
#include "backend/cuda/stream.h"
#include "backend/cuda/wgmma_primitives.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LTX_WGMMA_DEVICE_CODE 1
#else
#define LTX_WGMMA_DEVICE_CODE 0
#endif

namespace ltx::cuda {

namespace {

using mma::cp_async_16;
using mma::cp_async_commit;
using mma::cp_async_wait;

// 1 in the sm_90a image, 0 in every other one: the host reads it from the image the driver loaded
// for a device to know whether the kernel below has a body there.
__device__ int g_wgmma_image = LTX_WGMMA_DEVICE_CODE;

constexpr int kGroups = 2;               // consumer warpgroups per block
constexpr int kThreads = 128 * kGroups;
constexpr int kRowsQ = 64 * kGroups;     // query rows per block
constexpr int kKeys = 128;               // keys per tile
constexpr int kStages = 3;               // K/V tiles in shared memory

struct WgmmaArgs {
  const __nv_bfloat16* q = nullptr;
  const __nv_bfloat16* k = nullptr;
  const __nv_bfloat16* v = nullptr;
  int64_t qs[3] = {}, ks[3] = {}, vs[3] = {};  // strides of B, H, T (the head dim is dense)
  AttentionMask mask;
  __nv_bfloat16* out = nullptr;
  int64_t os[3] = {};  // out strides of B, H, T (the head dim is dense)
  int heads = 0;
  int64_t tq = 0, tk = 0;
  float scale = 0.f;
};

template <int kDim>
constexpr uint32_t q_bytes() {
  return kRowsQ * kDim * 2;
}
template <int kDim>
constexpr uint32_t tile_bytes() {
  return kKeys * kDim * 2;
}
// +1024: the dynamic shared memory is re-aligned to the 1024-byte swizzle atom.
template <int kDim>
constexpr size_t smem_bytes() {
  return q_bytes<kDim>() + 2 * kStages * tile_bytes<kDim>() + 1024;
}

#if LTX_WGMMA_DEVICE_CODE
// Copies rows [r0, r0 + kRows) of one (b, h) slice into the 128-byte swizzle layout: kDim / 64
// column blocks of kRows rows x 128 bytes, 16-byte chunk c of row r at chunk c ^ (r % 8). Rows at
// or past `limit` are zero-filled (so padded keys multiply as zeros, never as stale NaNs).
template <int kDim, int kRows>
__device__ __forceinline__ void load_tile(uint32_t smem, const __nv_bfloat16* base,
                                          int64_t row_stride, int64_t r0, int64_t limit) {
  constexpr int kChunks = kDim / 8;
  constexpr int kRowsPerPass = kThreads / kChunks;
  static_assert(kRowsPerPass % 8 == 0, "a thread's rows keep one swizzle phase");
  const int c = static_cast<int>(threadIdx.x) % kChunks;
  const int r_first = static_cast<int>(threadIdx.x) / kChunks;
  const uint32_t dst0 = smem + (c / 8) * (kRows * 128) + r_first * 128 + (((c % 8) ^ (r_first & 7)) << 4);
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const int64_t row = r0 + r_first + i * kRowsPerPass;
    const bool valid = row < limit;
    const __nv_bfloat16* src = valid ? base + row * row_stride + c * 8 : base;
    cp_async_16(dst0 + i * kRowsPerPass * 128, src, valid);
  }
}

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
__global__ void __launch_bounds__(kThreads, 1) wgmma_attention_kernel(WgmmaArgs a) {
#if LTX_WGMMA_DEVICE_CODE
  constexpr int kQkSteps = kDim / 16;   // k-steps of Q K^T (4 per 64-column block)
  constexpr int kPvSteps = kKeys / 16;  // k-steps of P V
  constexpr int kOut = kDim / 2;        // O accumulators per thread
  constexpr int kS = kKeys / 2;         // S accumulators per thread
  constexpr uint32_t kQBytes = q_bytes<kDim>(), kTileBytes = tile_bytes<kDim>();

  extern __shared__ unsigned char smem_raw[];
  const uint32_t smem = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  const uint32_t q_smem = smem;
  const auto k_smem = [=](int t) { return smem + kQBytes + (t % kStages) * kTileBytes; };
  const auto v_smem = [=](int t) { return smem + kQBytes + (kStages + t % kStages) * kTileBytes; };

  const int bh = blockIdx.y;
  const int b = bh / a.heads, h = bh % a.heads;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kRowsQ;
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128, warp = (tid % 128) / 32, lane = tid & 31;
  const int g = lane >> 2, c4 = lane & 3;  // accumulator coordinates: row group, column pair

  const __nv_bfloat16* qb = a.q + b * a.qs[0] + h * a.qs[1];
  const __nv_bfloat16* kb = a.k + b * a.ks[0] + h * a.ks[1];
  const __nv_bfloat16* vb = a.v + b * a.vs[0] + h * a.vs[1];
  const int num_tiles = static_cast<int>((a.tk + kKeys - 1) / kKeys);
  const auto load_kv = [&](int t) {
    const int64_t key0 = t * int64_t{kKeys};
    load_tile<kDim, kKeys>(k_smem(t), kb, a.ks[2], key0, a.tk);
    load_tile<kDim, kKeys>(v_smem(t), vb, a.vs[2], key0, a.tk);
  };

  // Groups: {Q, tile 0}, {tile 1}; iteration t commits tile t + 2 (empty groups keep the count).
  load_tile<kDim, kRowsQ>(q_smem, qb, a.qs[2], q0, a.tq);
  if (num_tiles > 0) load_kv(0);
  cp_async_commit();
  if (num_tiles > 1) load_kv(1);
  cp_async_commit();

  float o[kOut];
#pragma unroll
  for (int i = 0; i < kOut; ++i) o[i] = 0.f;
  float s[kS];
  uint32_t p[kPvSteps][4];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
  // This thread's query rows: row_base and row_base + 8.
  const int64_t row_base = q0 + wg * 64 + warp * 16 + g;
  // exp(scale * (x - m)) = exp2(x * sl - m * sl); masked logits already carry the scale.
  const float sl = kMasked ? mma::kLog2e : a.scale * mma::kLog2e;

  // S = Q K^T for this warpgroup's 64 rows and tile t's 128 keys (issued and committed only).
  const auto issue_qk = [&](int t) {
#pragma unroll
    for (int kk = 0; kk < kQkSteps; ++kk) {
      const uint32_t col = (kk % 4) * 32;
      const uint64_t da = wgmma::smem_desc(
          q_smem + (kk / 4) * (kRowsQ * 128) + wg * (64 * 128) + col, 16, 1024);
      const uint64_t db = wgmma::smem_desc(k_smem(t) + (kk / 4) * (kKeys * 128) + col, 16, 1024);
      if (kk == 0) {
        wgmma::wgmma_ss_m64n128k16<false>(s, da, db);
      } else {
        wgmma::wgmma_ss_m64n128k16<true>(s, da, db);
      }
    }
    wgmma::commit();
  };
  // O += P V for tile t (issued and committed only). V's 64-column blocks are kKeys * 128 bytes
  // apart (the leading offset of the MN-major layout), its 8-key groups 1024.
  const auto issue_pv = [&](int t) {
#pragma unroll
    for (int j = 0; j < kPvSteps; ++j) {
      const uint64_t dv = wgmma::smem_desc(v_smem(t) + j * (16 * 128), kKeys * 128, 1024);
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

  if (num_tiles > 0) {
    cp_async_wait<1>();
    wgmma::fence_proxy_async();
    __syncthreads();
    wgmma::fence();
    issue_qk(0);
    wgmma::wait<0>();
    wgmma::fence_regs(s);
    float corr[2];
    softmax(0, corr);  // o is still zero: nothing to rescale
    pack_p();
  }
  // Tiles 0 .. n - 2: P V of tile t overlaps S and the softmax of tile t + 1. No branch around the
  // wgmma issues (ptxas serialises wgmma pipelines whose accumulators merge across branches).
  for (int t = 0; t + 1 < num_tiles; ++t) {
    cp_async_wait<0>();  // tile t + 1 (this thread's copies)
    wgmma::fence_proxy_async();
    __syncthreads();  // everyone's copies landed; everyone is done with tile t - 1
    if (t + 2 < num_tiles) load_kv(t + 2);  // into tile t - 1's stage
    cp_async_commit();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_qk(t + 1);
    issue_pv(t);
    wgmma::wait<1>();  // S of tile t + 1; P V of tile t may still run
    wgmma::fence_regs(s);
    float corr[2];
    softmax(t + 1, corr);
    wgmma::wait<0>();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
#pragma unroll
    for (int i = 0; i < kOut; ++i) o[i] *= corr[(i >> 1) & 1];
    pack_p();
  }
  if (num_tiles > 0) {  // the last tile's P V
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_pv(num_tiles - 1);
    wgmma::wait<0>();
    wgmma::fence_regs(o);
  }
  cp_async_wait<0>();  // Tk == 0: the copies were never waited for

  // Normalise and store: this thread holds dims (8n + 2 c4, +1) of rows row_base (+8).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int64_t row = row_base + r * 8;
    if (row >= a.tq) continue;
    const float inv = l > 0.f ? 1.f / l : 0.f;  // no attended key: zeros
    __nv_bfloat16* dst = a.out + b * a.os[0] + h * a.os[1] + row * a.os[2] + 2 * c4;
#pragma unroll
    for (int n = 0; n < kDim / 8; ++n) {
      *reinterpret_cast<uint32_t*>(dst + n * 8) =
          mma::pack_bf16(o[4 * n + 2 * r] * inv, o[4 * n + 2 * r + 1] * inv);
    }
  }
#else
  (void)a;  // no sm_90a image: the host never launches this (wgmma_attention_applies)
#endif
}

template <int kDim, bool kMasked>
void launch(const WgmmaArgs& a, int64_t batch_heads, int device, cudaStream_t stream) {
  static std::once_flag configured[64];
  constexpr size_t kSmem = smem_bytes<kDim>();
  std::call_once(configured[device % 64], [] {
    LTX_CUDA_CHECK(cudaFuncSetAttribute(wgmma_attention_kernel<kDim, kMasked>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmem)));
  });
  const dim3 grid(static_cast<unsigned>((a.tq + kRowsQ - 1) / kRowsQ),
                  static_cast<unsigned>(batch_heads));
  wgmma_attention_kernel<kDim, kMasked><<<grid, kThreads, kSmem, stream>>>(a);
  LTX_CUDA_CHECK_LAUNCH();
}

template <int kDim>
void launch_dim(const WgmmaArgs& a, int64_t batch_heads, int device, cudaStream_t stream) {
  if (a.mask.kind == MaskKind::None) {
    launch<kDim, false>(a, batch_heads, device, stream);
  } else {
    launch<kDim, true>(a, batch_heads, device, stream);
  }
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
  if (q.size(0) * q.size(1) >= 65536) return false;  // grid.y
  if (!bf16_rows_loadable(q) || !bf16_rows_loadable(k) || !bf16_rows_loadable(v)) return false;
  return wgmma_attention_available(q.device().index);
}

void wgmma_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                     float scale, Tensor& out) {
  WgmmaArgs a;
  a.q = static_cast<const __nv_bfloat16*>(q.raw_data());
  a.k = static_cast<const __nv_bfloat16*>(k.raw_data());
  a.v = static_cast<const __nv_bfloat16*>(v.raw_data());
  for (int i = 0; i < 3; ++i) {
    a.qs[i] = q.stride(i);
    a.ks[i] = k.stride(i);
    a.vs[i] = v.stride(i);
    a.os[i] = out.stride(i);
  }
  a.mask = attention_mask(mask);
  a.out = static_cast<__nv_bfloat16*>(out.raw_data());
  a.heads = static_cast<int>(q.size(1));
  a.tq = q.size(2);
  a.tk = k.size(2);
  a.scale = scale;
  const int64_t batch_heads = q.size(0) * q.size(1);
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t s = current_stream(dev).handle();
  if (q.size(3) == 64) {
    launch_dim<64>(a, batch_heads, dev, s);
  } else {
    launch_dim<128>(a, batch_heads, dev, s);
  }
}

}  // namespace ltx::cuda
