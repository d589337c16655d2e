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

}  // namespace ltx::ops
