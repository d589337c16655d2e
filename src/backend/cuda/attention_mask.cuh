#pragma once
// The attention mask as both attention kernels read it: bool/u8 (nonzero = attend) or an additive
// f32/bf16 bias, expanded to [B, H, Tq, Tk] by the caller (stride 0 where broadcast). And what
// the fused bf16 kernels share besides: their parameters and their output store (with the
// optional per-head gate).
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/elementwise_loop.cuh"
#include "backend/cuda/mma_primitives.cuh"
#include "backend/common/scalar_math.h"
#include "core/tensor.h"

namespace ltx::cuda {

enum class MaskKind : int { None, Bool, Additive };

struct AttentionMask {
  const void* p = nullptr;
  DType dtype = DType::F32;
  MaskKind kind = MaskKind::None;
  int64_t s[4] = {};  // strides of the expanded [B, H, Tq, Tk]

  // The scaled logit x of (b, h, row, key) after the mask: bias added, or -inf where not attended.
  __device__ __forceinline__ float apply(float x, int64_t b, int64_t h, int64_t row, int64_t key) const {
    const int64_t off = b * s[0] + h * s[1] + row * s[2] + key * s[3];
    if (kind == MaskKind::Additive) return x + load_f32(p, dtype, off);
    return static_cast<const uint8_t*>(p)[off] == 0 ? -INFINITY : x;
  }
};

// Undefined mask: kind None.
inline AttentionMask attention_mask(const Tensor& mask) {
  AttentionMask m;
  if (!mask.defined()) return m;
  m.p = mask.raw_data();
  m.dtype = mask.dtype();
  m.kind = (m.dtype == DType::Bool || m.dtype == DType::U8) ? MaskKind::Bool : MaskKind::Additive;
  for (int i = 0; i < 4; ++i) m.s[i] = mask.stride(i);
  return m;
}

// The per-head output gate 2 * sigmoid(logits[b, t, h]): f32 or bf16 logits expanded to
// [B, Tq, H] by the caller (any strides). Undefined: p == nullptr.
struct AttentionGate {
  const void* p = nullptr;
  DType dtype = DType::F32;
  int64_t s[3] = {};  // strides of [B, Tq, H]

  // The factor of output row (b, h, row), as mul_2sigmoid computes it from the logit it loads.
  __device__ __forceinline__ float factor(int64_t b, int64_t h, int64_t row) const {
    return scalar::two_sigmoid(load_f32(p, dtype, b * s[0] + row * s[1] + h * s[2]),
                               dtype == DType::BF16);
  }
};

// What the fused bf16 kernels (attention_mma.cu, attention_wgmma.cu) take besides their operands:
// the mask, the gate, the output with a dense head dim (strides of B, H, T), the sizes and the
// scale.
struct FusedAttentionParams {
  AttentionMask mask;
  AttentionGate gate;
  void* out = nullptr;  // bf16, or f32 (only with f32 gate logits)
  bool out_f32 = false;
  int64_t os[3] = {};
  int heads = 0;
  int64_t tq = 0, tk = 0;
  float scale = 0.f;

  // The gate factor of output row (b, h, row); 1 (unused) without a gate.
  __device__ __forceinline__ float gate_factor(int64_t b, int64_t h, int64_t row) const {
    return gate.p != nullptr ? gate.factor(b, h, row) : 1.f;
  }

  // Stores the normalised values x0, x1 of dims (d, d + 1) of a row at element `off` of the output
  // (even: a 4- or 8-byte store). They are rounded to bf16, the attention output's dtype; with a
  // gate, that bf16 value times gate_f (the row's gate_factor) is what mul_2sigmoid computes from
  // the stored attention output, rounded to its result dtype: the composition's bits.
  __device__ __forceinline__ void store_pair(int64_t off, float x0, float x1, float gate_f) const {
    const uint32_t packed = mma::pack_bf16(x0, x1);
    if (gate.p == nullptr) {
      *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(out) + off) = packed;
      return;
    }
    const auto gated = [&](int half) {  // the low half is x0
      const uint16_t stored = static_cast<uint16_t>(packed >> (16 * half));
      return dtype_bits::mul_rn(dtype_bits::bf16_to_f32(stored), gate_f);
    };
    const float y0 = gated(0), y1 = gated(1);
    if (out_f32) {
      *reinterpret_cast<float2*>(static_cast<float*>(out) + off) = make_float2(y0, y1);
    } else {
      *reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(out) + off) =
          dtype_bits::f32_to_bf16(y0) | (static_cast<uint32_t>(dtype_bits::f32_to_bf16(y1)) << 16);
    }
  }
};

inline FusedAttentionParams fused_attention_params(const Tensor& q, const Tensor& k,
                                                   const Tensor& mask, const Tensor& gate,
                                                   float scale, Tensor& out) {
  FusedAttentionParams p;
  p.mask = attention_mask(mask);
  if (gate.defined()) {
    p.gate.p = gate.raw_data();
    p.gate.dtype = gate.dtype();
    for (int i = 0; i < 3; ++i) p.gate.s[i] = gate.stride(i);
  }
  LTX_CHECK(out.dtype() == DType::BF16 || (out.dtype() == DType::F32 && gate.defined() &&
                                           gate.dtype() == DType::F32),
            "fused attention: the output must be bf16, or f32 with f32 gate logits; got ",
            out.describe());
  p.out = out.raw_data();
  p.out_f32 = out.dtype() == DType::F32;
  for (int i = 0; i < 3; ++i) p.os[i] = out.stride(i);
  p.heads = static_cast<int>(q.size(1));
  p.tq = q.size(2);
  p.tk = k.size(2);
  p.scale = scale;
  return p;
}

}  // namespace ltx::cuda
