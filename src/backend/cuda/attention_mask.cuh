#pragma once
// The attention mask as both attention kernels read it: bool/u8 (nonzero = attend) or an additive
// f32/bf16 bias, expanded to [B, H, Tq, Tk] by the caller (stride 0 where broadcast).
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/elementwise_loop.cuh"
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

// What the fused bf16 kernels (attention_mma.cu, attention_wgmma.cu) take besides their operands:
// the mask, the bf16 output with a dense head dim (strides of B, H, T), the sizes and the scale.
struct FusedAttentionParams {
  AttentionMask mask;
  __nv_bfloat16* out = nullptr;
  int64_t os[3] = {};
  int heads = 0;
  int64_t tq = 0, tk = 0;
  float scale = 0.f;
};

inline FusedAttentionParams fused_attention_params(const Tensor& q, const Tensor& k,
                                                   const Tensor& mask, float scale, Tensor& out) {
  FusedAttentionParams p;
  p.mask = attention_mask(mask);
  p.out = static_cast<__nv_bfloat16*>(out.raw_data());
  for (int i = 0; i < 3; ++i) p.os[i] = out.stride(i);
  p.heads = static_cast<int>(q.size(1));
  p.tq = q.size(2);
  p.tk = k.size(2);
  p.scale = scale;
  return p;
}

}  // namespace ltx::cuda
