#include "backend/cuda/attention.h"

#include <algorithm>

#include "backend/cuda/attention_mask.cuh"
#include "backend/cuda/block_reduce.cuh"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/launch.h"
#include "op_types/checks.h"

namespace ltx::cuda {

namespace {

// Block shape: kWarps warps, each owning kRowsPerWarp query rows; keys stream through shared
// memory kKeys at a time. Within a warp, lane j scores key j of the tile, then every lane
// accumulates its slice of the head dim (dims lane, lane + 32, ...) over the tile's 32 keys.
constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kRows = kWarps * kRowsPerWarp;
constexpr int kKeys = 32;
constexpr int kThreads = kWarps * 32;

struct Operand {
  const void* p = nullptr;
  DType dtype = DType::F32;
  int64_t s[4] = {};  // strides of [B, H, T, D] (or of the expanded mask [B, H, Tq, Tk])
};

struct AttnArgs {
  Operand q, k, v;
  AttentionMask mask;
  void* out = nullptr;
  DType out_dtype = DType::F32;
  int64_t heads = 0, tq = 0, tk = 0, d = 0, dv = 0;
  int64_t q_blocks = 0;
  float scale = 1.f;
};

__device__ __forceinline__ float load_at(const Operand& o, int64_t b, int64_t h, int64_t t,
                                         int64_t i) {
  return load_f32(o.p, o.dtype, b * o.s[0] + h * o.s[1] + t * o.s[2] + i * o.s[3]);
}

template <int kDim>
__global__ void __launch_bounds__(kThreads) flash_attention_kernel(AttnArgs a) {
  constexpr int kPer = kDim / 32;  // head-dim elements per lane
  // Dynamic shared memory (D 256 needs 81 KiB): qs[kRows][kDim], ks[kKeys][kDim + 1] (+1: lane j
  // reads row j, conflict-free), vs[kKeys][kDim].
  extern __shared__ float simple_smem[];
  auto* qs = reinterpret_cast<float(*)[kDim]>(simple_smem);
  auto* ks = reinterpret_cast<float(*)[kDim + 1]>(simple_smem + kRows * kDim);
  auto* vs = reinterpret_cast<float(*)[kDim]>(simple_smem + kRows * kDim + kKeys * (kDim + 1));

  const int64_t bh = blockIdx.x / a.q_blocks, qb = blockIdx.x % a.q_blocks;
  const int64_t b = bh / a.heads, h = bh % a.heads;
  const int64_t q0 = qb * kRows;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  for (int idx = threadIdx.x; idx < kRows * kDim; idx += kThreads) {
    const int r = idx / kDim, i = idx % kDim;
    const int64_t t = q0 + r;
    qs[r][i] = (t < a.tq && i < a.d) ? load_at(a.q, b, h, t, i) : 0.f;
  }

  const float kNegInf = -INFINITY;
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kPer];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = kNegInf;
    l[r] = 0.f;
#pragma unroll
    for (int c = 0; c < kPer; ++c) acc[r][c] = 0.f;
  }

  for (int64_t k0 = 0; k0 < a.tk; k0 += kKeys) {
    __syncthreads();  // the previous tile (and, first time, nothing) is no longer read
    for (int idx = threadIdx.x; idx < kKeys * kDim; idx += kThreads) {
      const int j = idx / kDim, i = idx % kDim;
      const int64_t key = k0 + j;
      const bool in = key < a.tk;
      ks[j][i] = (in && i < a.d) ? load_at(a.k, b, h, key, i) : 0.f;
      vs[j][i] = (in && i < a.dv) ? load_at(a.v, b, h, key, i) : 0.f;
    }
    __syncthreads();

    const int64_t key = k0 + lane;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row_in_block = warp * kRowsPerWarp + r;
      const int64_t row = q0 + row_in_block;
      if (row >= a.tq) break;  // warp-uniform
      float s = kNegInf;
      if (key < a.tk) {
        float dot = 0.f;
#pragma unroll 16
        for (int i = 0; i < kDim; ++i) dot += qs[row_in_block][i] * ks[lane][i];
        s = dot * a.scale;
        if (a.mask.kind != MaskKind::None) s = a.mask.apply(s, b, h, row, key);
      }
      // The max skips NaNs (fmaxf), as the CPU's; a NaN score still poisons the row's sum.
      float tile_max = s;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
      const float m_new = fmaxf(m[r], tile_max);
      if (m_new == kNegInf) continue;  // every key so far is masked out: nothing to add
      const float p = expf(s - m_new);
      const float corr = expf(m[r] - m_new);
      l[r] = l[r] * corr + warp_sum(p);
      m[r] = m_new;
#pragma unroll
      for (int c = 0; c < kPer; ++c) acc[r][c] *= corr;
#pragma unroll 8
      for (int j = 0; j < kKeys; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
#pragma unroll
        for (int c = 0; c < kPer; ++c) acc[r][c] += pj * vs[j][lane + 32 * c];
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t row = q0 + warp * kRowsPerWarp + r;
    if (row >= a.tq) break;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // no attended key: zeros (l == 0)
    const bool nan_row = l[r] != l[r];
    const int64_t base = ((b * a.heads + h) * a.tq + row) * a.dv;
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
      const int i = lane + 32 * c;
      if (i < a.dv) store_f32(a.out, a.out_dtype, base + i, nan_row ? l[r] : acc[r][c] * inv);
    }
  }
}

template <int kDim>
void launch_simple(const AttnArgs& a, unsigned grid, cudaStream_t stream) {
  constexpr size_t kSmem = sizeof(float) * (kRows * kDim + kKeys * (kDim + 1) + kKeys * kDim);
  allow_dynamic_smem(reinterpret_cast<const void*>(flash_attention_kernel<kDim>), kSmem);
  flash_attention_kernel<kDim><<<grid, kThreads, kSmem, stream>>>(a);
  LTX_CUDA_CHECK_LAUNCH();
}

Operand operand(const Tensor& t) {
  Operand o;
  o.p = t.raw_data();
  o.dtype = t.dtype();
  for (int i = 0; i < 4; ++i) o.s[i] = t.stride(i);
  return o;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, float scale, AttentionKernel kernel,
                                    const Tensor& head_gate_logits) {
  const int64_t batch = q.size(0), heads = q.size(1), tq = q.size(2), d = q.size(3);
  const int64_t tk = k.size(2), dv = v.size(3);
  const int64_t width = std::max(d, dv);
  LTX_CHECK(width <= 256, "scaled_dot_product_attention: head dims up to 256 are supported on "
            "CUDA, got q ", q.describe(), " and v ", v.describe(), "; run it on the CPU");
  const bool wgmma = wgmma_attention_applies(q, k, v);
  LTX_CHECK(kernel != AttentionKernel::Wgmma || wgmma,
            "scaled_dot_product_attention: the wgmma kernel needs an sm_90 GPU, a binary built for "
            "sm_90a (CMAKE_CUDA_ARCHITECTURES with 90a), bf16 q/k/v with equal head dims of 64 or "
            "128, a dense head dim and 16-byte aligned rows; got q ",
            q.describe(), ", k ", k.describe(), ", v ", v.describe());
  const Tensor& gate = head_gate_logits;
  // The fused kernels' result: stored as [B, Tq, H, Dv] (the output projection reads it without a
  // transpose copy); bf16, or f32 when f32 gate logits make mul_2sigmoid's result f32.
  const auto fused_out = [&] {
    const DType dt = gate.defined() && gate.dtype() != DType::BF16 ? DType::F32 : DType::BF16;
    return Tensor::empty({batch, tq, heads, dv}, dt, q.device()).transpose(1, 2);
  };
  if (wgmma && (kernel == AttentionKernel::Auto || kernel == AttentionKernel::Wgmma) &&
      q.numel() > 0) {
    Tensor out = fused_out();
    wgmma_attention(q, k, v, mask, gate, scale, out);  // Tk == 0 gives zeros
    return out;
  }
  const bool tensor_cores = tensor_core_attention_applies(q, k, v);
  LTX_CHECK(kernel != AttentionKernel::TensorCore || tensor_cores,
            "scaled_dot_product_attention: the tensor-core kernel needs bf16 q/k/v with equal head "
            "dims of 32, 64, 128 or 256, a dense head dim and 16-byte aligned rows on an sm_80+ GPU; got q ",
            q.describe(), ", k ", k.describe(), ", v ", v.describe());
  if (tensor_cores && kernel != AttentionKernel::Simple && q.numel() > 0) {
    Tensor out = fused_out();
    tensor_core_attention(q, k, v, mask, gate, scale, out);  // Tk == 0 gives zeros
    return out;
  }
  Tensor out = Tensor::empty({batch, heads, tq, dv}, ops::float_result_dtype({&q, &k, &v}),
                             q.device());
  // Simple: the gate as the composition (the [B, Tq, H] logits as [B, H, Tq, 1]).
  const auto gated = [&](const Tensor& o) {
    return gate.defined() ? mul_2sigmoid(o, gate.transpose(1, 2).unsqueeze(-1)) : o;
  };
  if (out.numel() == 0) return gated(out);
  AttnArgs a;
  a.q = operand(q);
  a.k = operand(k);
  a.v = operand(v);
  a.mask = attention_mask(mask);
  a.out = out.raw_data();
  a.out_dtype = out.dtype();
  a.heads = heads;
  a.tq = tq;
  a.tk = tk;
  a.d = d;
  a.dv = dv;
  a.q_blocks = (tq + kRows - 1) / kRows;
  a.scale = scale;
  const int64_t blocks = batch * heads * a.q_blocks;
  LTX_CHECK(blocks < (int64_t{1} << 31), "scaled_dot_product_attention: too many query blocks (",
            blocks, ") for one launch");
  const int dev = q.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t s = current_stream(dev).handle();
  const unsigned grid = static_cast<unsigned>(blocks);
  if (width <= 32) {
    launch_simple<32>(a, grid, s);
  } else if (width <= 64) {
    launch_simple<64>(a, grid, s);
  } else if (width <= 128) {
    launch_simple<128>(a, grid, s);
  } else {
    launch_simple<256>(a, grid, s);
  }
  return gated(out);
}

}  // namespace ltx::cuda
