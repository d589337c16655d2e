// The fused SwiGLU MLP on Hopper (sm_90a); the contract is in mlp.h.
//
// A block owns 128 rows of y and has three warpgroups. The first is the producer: one thread loads
// the block's y tile once (TMA, 64 x 64 boxes, 128-byte swizzle, rows past n zero-filled) and then
// streams the weights chunk after chunk of 64 hidden units: the gate rows Wg_c [64, C], the up rows
// Wu_c [64, C] and the down columns Wd_c [C, 64], each one "item" of C * 128 bytes. Items go
// through a ring of kSlots equal slots, item i in slot i % kSlots, with a "full" mbarrier (the TMA
// bytes landed) and an "empty" one (both consumers are done with it) per slot. The other two
// warpgroups are the consumers, 64 rows each; per chunk c a consumer
//   - issues G = y Wg_c^T and U = y Wu_c^T (m64n64k16, both operands from shared memory through
//     K-major descriptors: a [64, C] weight block is B's K-major layout as it is stored);
//   - forms P = bf16(silu(bf16 G) * bf16 U) in registers, the exact per-element math of
//     ops::silu_mul on the bf16 values cuBLAS would have stored;
//   - issues O += P Wd_c^T (m64nCk16, P from registers in the accumulator layout, Wd_c K-major).
// G / U of chunk c + 1 are in flight together with P Wd_c of chunk c, so the activation runs on
// the CUDA cores while the tensor cores finish the down product (attention_wgmma.cu's overlap of
// S and P V). Consumption order of the items: G_0 U_0, then per step G_{c+1} U_{c+1} D_c; the
// ring cannot deadlock for kSlots >= 3 (the producer's item i waits for item i - kSlots, which the
// consumers release before they wait for any item past i - 1).
// Epilogue: O (f32) rounded to bf16 (the down GEMM's output), added to the residual in f32 and
// rounded to bf16 (add_), stored as bf16 pairs.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>

#include "backend/cuda/attention.h"
#include "backend/cuda/device.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/mlp.h"
#include "backend/cuda/mma_primitives.cuh"
#include "backend/cuda/stream.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/wgmma_primitives.cuh"
#include "backend/common/scalar_math.h"
#include "core/dtype_bits.h"

namespace ltx::cuda {

namespace {

constexpr int kConsumers = 2;                     // consumer warpgroups per block
constexpr int kThreads = 128 * (kConsumers + 1);  // + the producer warpgroup
[[maybe_unused]] constexpr int kConsumerThreads = 128 * kConsumers;
constexpr int kRows = 64 * kConsumers;  // rows of y per block
constexpr int kChunk = 64;              // hidden units per chunk (one 128-byte swizzle row)
[[maybe_unused]] constexpr uint32_t kBox = 64 * 128;  // bytes of one 64 x 64 bf16 TMA box

template <int kC>
constexpr uint32_t y_bytes() {
  return kRows * kC * 2;
}
// One item (a gate / up / down chunk): 64 x C or C x 64 bf16.
template <int kC>
constexpr uint32_t item_bytes() {
  return kChunk * kC * 2;
}
// As many slots as fit beside y in the 227 KB of shared memory, at most 8.
template <int kC>
constexpr int slots() {
  return std::min<int>(8, static_cast<int>((227 * 1024 - 2048 - y_bytes<kC>()) / item_bytes<kC>()));
}
// +1024: the dynamic shared memory is re-aligned to the 1024-byte swizzle atom.
template <int kC>
constexpr size_t smem_bytes() {
  return y_bytes<kC>() + slots<kC>() * item_bytes<kC>() + 8 * (1 + 2 * slots<kC>()) + 1024;
}
static_assert(slots<256>() >= 3 && smem_bytes<256>() <= 227 * 1024, "C 256 does not fit");
static_assert(slots<128>() >= 3 && smem_bytes<128>() <= 227 * 1024, "C 128 does not fit");
static_assert(slots<64>() >= 3 && smem_bytes<64>() <= 227 * 1024, "C 64 does not fit");

// Tensor maps of y [n, C], w_gate_up [2 H, C] and w_down [C, H]; 64 x 64 boxes, 128-byte swizzle.
struct SwigluMaps {
  CUtensorMap y, gate_up, down;
};

struct SwigluArgs {
  __nv_bfloat16* residual;  // [n, C] contiguous
  int64_t n;
  int hidden;
};

#if LTX_WGMMA_DEVICE_CODE
template <int kC>
__device__ __forceinline__ void wgmma_down(float (&o)[kC / 2], const uint32_t (&p)[4],
                                           uint64_t desc) {
  if constexpr (kC == 256) {
    wgmma::wgmma_rs_m64n256k16(o, p, desc);
  } else if constexpr (kC == 128) {
    wgmma::wgmma_rs_m64n128k16(o, p, desc);
  } else {
    wgmma::wgmma_rs_m64n64k16(o, p, desc);
  }
}

__device__ __forceinline__ float round_bf16(float x) {
  return dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(x));
}
#endif

template <int kC>
__global__ void __launch_bounds__(kThreads, 1)
    swiglu_wgmma_kernel(const __grid_constant__ SwigluMaps maps, const SwigluArgs a) {
#if LTX_WGMMA_DEVICE_CODE
  constexpr int kSlots = slots<kC>();
  constexpr int kBlocks = kC / 64;       // 64-column (128-byte) blocks of a y / weight row
  constexpr int kGuSteps = kC / 16;      // k-steps of G and U
  constexpr int kDownSteps = kChunk / 16;  // k-steps of P Wd^T
  constexpr int kOut = kC / 2;           // O accumulators per thread
  constexpr int kAct = kChunk / 2;       // G (and U) accumulators per thread
  constexpr uint32_t kYBytes = y_bytes<kC>(), kItemBytes = item_bytes<kC>();

  extern __shared__ unsigned char smem_raw[];
  const uint32_t smem = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023u) & ~1023u;
  // y: box (k-block kb, half) at (2 kb + half) * kBox, so consumer cw's 64 rows of k-block kb are
  // one 8 KB K-major tile.
  const uint32_t y_smem = smem;
  const auto slot_smem = [=](int slot) { return smem + kYBytes + slot * kItemBytes; };
  const uint32_t bars = smem + kYBytes + kSlots * kItemBytes;
  const uint32_t y_full = bars;
  const auto full = [=](int slot) { return bars + 8 * (1 + slot); };
  const auto empty = [=](int slot) { return bars + 8 * (1 + kSlots + slot); };

  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid / 128;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int chunks = a.hidden / kChunk;
  const int items = 3 * chunks;

  if (tid == 0) {
    wgmma::mbar_init(y_full, 1);
    for (int s = 0; s < kSlots; ++s) {
      wgmma::mbar_init(full(s), 1);
      wgmma::mbar_init(empty(s), kConsumerThreads);
    }
    wgmma::mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    wgmma::setmaxnreg_dec<24>();
    if (tid == 0) {
      wgmma::mbar_arrive_expect_tx(y_full, kYBytes);
#pragma unroll
      for (int kb = 0; kb < kBlocks; ++kb) {
#pragma unroll
        for (int half = 0; half < 2; ++half)
          wgmma::tma_load_2d(y_smem + (2 * kb + half) * kBox, &maps.y, 64 * kb,
                             static_cast<int>(row0) + 64 * half, y_full);
      }
      for (int i = 0; i < items; ++i) {
        const int slot = i % kSlots, c = i / 3, kind = i % 3;
        wgmma::mbar_wait(empty(slot), ((i / kSlots) & 1) ^ 1);
        wgmma::mbar_arrive_expect_tx(full(slot), kItemBytes);
        const uint32_t dst = slot_smem(slot);
#pragma unroll
        for (int kb = 0; kb < kBlocks; ++kb) {
          if (kind == 2) {  // Wd[64 kb .. 64 kb + 63, 64 c .. 64 c + 63]: rows of the output dim
            wgmma::tma_load_2d(dst + kb * kBox, &maps.down, kChunk * c, 64 * kb, full(slot));
          } else {  // gate (kind 0) or up (kind 1) rows of chunk c, k-block kb
            wgmma::tma_load_2d(dst + kb * kBox, &maps.gate_up, 64 * kb,
                               kChunk * c + (kind == 1 ? a.hidden : 0), full(slot));
          }
        }
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
  float gate[kAct], up[kAct];
  uint32_t p[kDownSteps][4];

  const auto wait_item = [&](int i) { wgmma::mbar_wait(full(i % kSlots), (i / kSlots) & 1); };
  const auto release_item = [&](int i) { wgmma::mbar_arrive(empty(i % kSlots)); };
  // G and U of chunk c (issued and committed only).
  const auto issue_gate_up = [&](int c) {
    const uint32_t wg_smem = slot_smem((3 * c) % kSlots), wu_smem = slot_smem((3 * c + 1) % kSlots);
    // Opaque to the compiler: it would otherwise hoist y's C / 16 loop-invariant 64-bit
    // descriptors out of the chunk loop and run out of registers (spills at C 256).
    uint32_t y_base = y_smem + cw * kBox;
    asm volatile("" : "+r"(y_base));
#pragma unroll
    for (int kk = 0; kk < kGuSteps; ++kk) {
      const uint32_t col = (kk % 4) * 32;
      const uint64_t da = wgmma::smem_desc(y_base + 2 * (kk / 4) * kBox + col, 16, 1024);
      const uint64_t dg = wgmma::smem_desc(wg_smem + (kk / 4) * kBox + col, 16, 1024);
      const uint64_t du = wgmma::smem_desc(wu_smem + (kk / 4) * kBox + col, 16, 1024);
      if (kk == 0) {
        wgmma::wgmma_ss_m64n64k16<false>(gate, da, dg);
        wgmma::wgmma_ss_m64n64k16<false>(up, da, du);
      } else {
        wgmma::wgmma_ss_m64n64k16<true>(gate, da, dg);
        wgmma::wgmma_ss_m64n64k16<true>(up, da, du);
      }
    }
    wgmma::commit();
  };
  // O += P Wd_c^T (issued and committed only): k-step j reads hidden units 16 j .. 16 j + 15 of the
  // chunk, 32 bytes into every 128-byte row of the C x 64 down tile.
  const auto issue_down = [&](int c) {
    const uint32_t wd_smem = slot_smem((3 * c + 2) % kSlots);
#pragma unroll
    for (int j = 0; j < kDownSteps; ++j)
      wgmma_down<kC>(o, p[j], wgmma::smem_desc(wd_smem + j * 32, 16, 1024));
    wgmma::commit();
  };
  // silu_mul's per-element math on the bf16-rounded G and U, left in `gate` (f32, rounded to bf16
  // when packed).
  const auto activate = [&] {
#pragma unroll
    for (int i = 0; i < kAct; ++i) {
      const float s = round_bf16(scalar::unary<ops::UnaryOp::Silu>(round_bf16(gate[i])));
      gate[i] = dtype_bits::mul_rn(s, round_bf16(up[i]));
    }
  };
  // P as the A operand of the down product: k-step j covers n-tiles 2 j and 2 j + 1 of G.
  const auto pack_p = [&] {
#pragma unroll
    for (int j = 0; j < kDownSteps; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) p[j][i] = mma::pack_bf16(gate[8 * j + 2 * i], gate[8 * j + 2 * i + 1]);
    }
  };

  wgmma::mbar_wait(y_full, 0);
  // Chunk 0's activation (chunks >= 1: H is a positive multiple of 64).
  wait_item(0);
  wait_item(1);
  wgmma::fence();
  issue_gate_up(0);
  wgmma::wait<0>();
  wgmma::fence_regs(gate);
  wgmma::fence_regs(up);
  release_item(0);
  release_item(1);
  activate();
  pack_p();
  // Chunks 0 .. n - 2: P Wd^T of chunk c overlaps G / U and the activation of chunk c + 1. No
  // branch around the wgmma issues (ptxas serialises wgmma pipelines whose accumulators merge
  // across branches).
  for (int c = 0; c + 1 < chunks; ++c) {
    wait_item(3 * c + 3);
    wait_item(3 * c + 4);
    wait_item(3 * c + 2);
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_gate_up(c + 1);
    issue_down(c);
    wgmma::wait<1>();  // G / U of chunk c + 1; the down product of chunk c may still run
    wgmma::fence_regs(gate);
    wgmma::fence_regs(up);
    release_item(3 * c + 3);
    release_item(3 * c + 4);
    activate();
    wgmma::wait<0>();
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    release_item(3 * c + 2);
    pack_p();
  }
  {  // the last chunk's down product
    const int last = chunks - 1;
    wait_item(3 * last + 2);
    wgmma::fence_regs(o);
    wgmma::fence_regs(p);
    wgmma::fence();
    issue_down(last);
    wgmma::wait<0>();
    wgmma::fence_regs(o);
  }

  // residual += bf16(O): this thread holds columns 8 j + 2 c4 (+1) of rows row_base (+8).
  const int64_t row_base = row0 + cw * 64 + warp * 16 + g;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row_base + r * 8;
    if (row >= a.n) continue;
    __nv_bfloat16* dst = a.residual + row * kC + 2 * c4;
#pragma unroll
    for (int j = 0; j < kC / 8; ++j) {
      uint32_t* cell = reinterpret_cast<uint32_t*>(dst + j * 8);
      const uint32_t old = *cell;
      const float r0 = dtype_bits::bf16_to_f32(static_cast<uint16_t>(old & 0xFFFFu));
      const float r1 = dtype_bits::bf16_to_f32(static_cast<uint16_t>(old >> 16));
      const float s0 = dtype_bits::add_rn(r0, round_bf16(o[4 * j + 2 * r]));
      const float s1 = dtype_bits::add_rn(r1, round_bf16(o[4 * j + 2 * r + 1]));
      *cell = static_cast<uint32_t>(dtype_bits::f32_to_bf16(s0)) |
              (static_cast<uint32_t>(dtype_bits::f32_to_bf16(s1)) << 16);
    }
  }
#else
  (void)a;  // no sm_90a image: the host never launches this (swiglu_wgmma_applies)
#endif
}

template <int kC>
void launch(const SwigluMaps& maps, const SwigluArgs& a, cudaStream_t stream) {
  constexpr size_t kSmem = smem_bytes<kC>();
  allow_dynamic_smem(reinterpret_cast<const void*>(swiglu_wgmma_kernel<kC>), kSmem);
  const dim3 grid(static_cast<unsigned>((a.n + kRows - 1) / kRows));
  swiglu_wgmma_kernel<kC><<<grid, kThreads, kSmem, stream>>>(maps, a);
  LTX_CUDA_CHECK_LAUNCH();
}

// The TMA map of a bf16 [rows, cols] matrix with a dense last dim: 64 x 64 boxes with the 128-byte
// swizzle; rows past the end read as zeros. One row may carry any stride (it gets the packed one).
CUtensorMap tensor_map_2d(const Tensor& t) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(t.size(1)),
                              static_cast<cuuint64_t>(t.size(0))};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(t.size(0) > 1 ? t.stride(0) : t.size(1)) *
                                 2};
  const cuuint32_t box[2] = {64, 64};
  return bf16_swizzled_tensor_map(t.raw_data(), 2, dims, strides, box, "swiglu_add_ (wgmma)", t);
}

// TMA wants 16-byte aligned rows and row strides below 2^40 bytes.
bool tma_rows(const Tensor& t) {
  return bf16_rows_loadable(t) && (t.size(0) <= 1 || (t.stride(0) > 0 && t.stride(0) < (int64_t{1} << 38)));
}

}  // namespace

bool swiglu_wgmma_applies(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                          const Tensor& w_down) {
  for (const Tensor* t : {&residual, &y, &w_gate_up, &w_down}) {
    if (!t->defined() || t->dtype() != DType::BF16 || t->dim() != 2 ||
        t->device().type != DeviceType::CUDA || t->device() != residual.device())
      return false;
  }
  const int64_t n = residual.size(0), c = residual.size(1), h = w_down.size(1);
  if (c != 64 && c != 128 && c != 256) return false;
  if (h <= 0 || h % kChunk != 0 || h > (int64_t{1} << 20)) return false;
  if (n <= 0 || n >= (int64_t{1} << 31) - kRows) return false;  // TMA row coordinates are int32
  if (y.size(0) != n || y.size(1) != c || w_down.size(0) != c || w_gate_up.size(0) != 2 * h ||
      w_gate_up.size(1) != c)
    return false;
  if (!residual.is_contiguous() || reinterpret_cast<uintptr_t>(residual.raw_data()) % 4 != 0)
    return false;
  if (!tma_rows(y) || !tma_rows(w_gate_up) || !tma_rows(w_down)) return false;
  return wgmma_attention_available(residual.device().index);
}

void swiglu_wgmma_add_(const Tensor& residual, const Tensor& y, const Tensor& w_gate_up,
                       const Tensor& w_down) {
  SwigluMaps maps;
  maps.y = tensor_map_2d(y);
  maps.gate_up = tensor_map_2d(w_gate_up);
  maps.down = tensor_map_2d(w_down);
  SwigluArgs a;
  a.residual = static_cast<__nv_bfloat16*>(residual.raw_data());
  a.n = residual.size(0);
  a.hidden = static_cast<int>(w_down.size(1));
  const int dev = residual.device().index;
  DeviceGuard guard(dev);
  const cudaStream_t s = current_stream(dev).handle();
  switch (residual.size(1)) {
    case 64: return launch<64>(maps, a, s);
    case 128: return launch<128>(maps, a, s);
    default: return launch<256>(maps, a, s);
  }
}

}  // namespace ltx::cuda
