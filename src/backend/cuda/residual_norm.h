#pragma once
// The transformer block's gated residual add fused with the next AdaLN norm on CUDA
// (ops::gated_add_rms_norm_modulate(2) semantics, src/ops/norm.h; residual_norm.cu). The norm and
// modulation are norm.h's rms_norm_modulate bit for bit.
#include "core/tensor.h"
#include "op_types/summed.h"

namespace ltx::cuda {

// ops::gated_add_rms_norm_modulate's one-pass kernel: x_next = gated_add(x, y, gate) and h =
// rms_norm_modulate(x_next, scale, shift, eps) from one block per row (x, y and the gate read
// once, x_next written once and staged in shared memory for the norm, which then runs as
// rms_norm_vec_kernel does), bit-identical to the two ops. Takes bf16 x and y of one contiguous
// shape, bf16 gate / scale / shift (each possibly an ops::Summed pair) broadcasting to it with
// the vector path's layout rules, all on x's device: gated_add_rms_norm_modulate_fusable says.
bool gated_add_rms_norm_modulate_fusable(const Tensor& x, const Tensor& y, const ops::Summed& gate,
                                         const ops::Summed& scale, const ops::Summed& shift);
void gated_add_rms_norm_modulate(const Tensor& x, const Tensor& y, const ops::Summed& gate,
                                 const ops::Summed& scale, const ops::Summed& shift, double eps,
                                 Tensor* x_next, Tensor* h);
// The same kernel with a second modulation of the one norm, stored at h2 (ops::
// gated_add_rms_norm_modulate2): where both modulations are fusable.
bool gated_add_rms_norm_modulate2_fusable(const Tensor& x, const Tensor& y, const ops::Summed& gate,
                                          const ops::Summed& scale, const ops::Summed& shift,
                                          const ops::Summed& scale2, const ops::Summed& shift2);
void gated_add_rms_norm_modulate2(const Tensor& x, const Tensor& y, const ops::Summed& gate,
                                  const ops::Summed& scale, const ops::Summed& shift,
                                  const ops::Summed& scale2, const ops::Summed& shift2, double eps,
                                  Tensor* x_next, Tensor* h, Tensor* h2);

}  // namespace ltx::cuda
