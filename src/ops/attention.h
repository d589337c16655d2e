#pragma once
// Scaled dot-product attention.
#include <optional>

#include "core/tensor.h"

namespace ltx::ops {

// torch.nn.functional.scaled_dot_product_attention without dropout or causal flag:
//   out = softmax(q @ k^T * scale + mask) @ v
// q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv] -> out [B, H, Tq, Dv] (Dv may differ from D).
// mask: undefined (none); Bool or U8 (nonzero = attend, as torch's bool masks); or f32, added to
// the scaled logits. Any shape broadcastable to [B, H, Tq, Tk] (e.g. [Tq, Tk], [B, 1, Tq, Tk],
// [B, 1, 1, Tk]). scale defaults to 1/sqrt(D).
// A query row whose logits are all -inf (every key masked by a bool mask, or -inf additive mask)
// gets an all-zero output row, as torch's math backend (_safe_softmax) gives; plain softmax would
// give NaN there.
// CPU: f32; any strides (the [B, T, H, D] -> [B, H, T, D] transpose views are used without a
// copy); never holds more than one (query block x Tk) score tile per thread.
// The result may be a view: the CUDA tensor-core kernel stores it as [B, Tq, H, Dv] (the layout
// the output projection wants) and returns the [B, H, Tq, Dv] transposed view, so callers use
// reshape / contiguous rather than view on it.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask = Tensor(),
                                    std::optional<double> scale = std::nullopt);

// The arguments after q, k, v, by name: scaled_dot_product_attention(q, k, v, {.mask = m,
// .head_gate_logits = g}).
struct AttentionOptions {
  Tensor mask;                  // as above
  std::optional<double> scale;  // as above
  // Optional per-head output gate (the transformer's gated attention): out[b, h, t, :] *=
  // 2 * sigmoid(head_gate_logits[b, t, h]). Any shape broadcastable to [B, Tq, H], any strides;
  // f32 (bf16 too on CUDA). The result is the composition
  //   mul_2sigmoid(scaled_dot_product_attention(q, k, v, mask, scale),
  //                g.transpose(1, 2).unsqueeze(-1))   (g: the logits expanded to [B, Tq, H])
  // bit for bit, with its dtype (bf16 only when the attention output and the logits both are).
  // The CPU and the CUDA-core kernel run that composition; the CUDA tensor-core kernels apply the
  // gate in their epilogue, so the output is written once, not written, read back and rewritten.
  Tensor head_gate_logits;
};
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options);

}  // namespace ltx::ops
