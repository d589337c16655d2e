#pragma once
// CUDA row normalisations (src/ops/norm.h semantics): RMSNorm (plain and with the AdaLN
// modulation), LayerNorm, GroupNorm; the gated residual + norm fusion is in residual_norm.h,
// PixelNorm in pixel_norm.h. x f32 or bf16 (any strides; non-contiguous
// inputs are copied first), weight/bias f32 or bf16 or undefined; the result has x's dtype.
// rms_norm / layer_norm: one block per row of the last dim; sums accumulate in f32 (per-thread
// partial sums, then a tree; LayerNorm sums x - x[0] so that a large common offset does not eat
// the mean's precision, then the squared deviations from the mean), the row's
// 1 / sqrt(mean + eps) is formed in double and rounded to f32 like the CPU's; every product of the
// normalisation rounds on its own (no FMA), as on the CPU.
#include "core/tensor.h"
#include "op_types/summed.h"

namespace ltx::cuda {

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
// One kernel for modulate(rms_norm(x), scale, shift): the rms_norm kernel's row statistics, the
// normalised value rounded to x's dtype, then the modulation of ops::modulate; bit-identical to
// the two ops. scale/shift broadcast to x (any strides); result dtype as ops::modulate's. Each may
// be an ops::Summed pair, summed per element with ops::add's rounding (bit-identical to
// materialising the sum first).
Tensor rms_norm_modulate(const Tensor& x, const ops::Summed& scale, const ops::Summed& shift,
                         double eps, const Tensor& weight = Tensor());
// rms_norm_modulate written into `out` (x's shape, the result dtype). x and out may both be
// segmented views, e.g. the same W-narrowing of contiguous [B, T, H, W, C] tensors (unit stride
// along C, dense rows along W, the leading dims collapsible): then the vector kernels read and
// write them in place, same bits; other layouts compute and copy.
void rms_norm_modulate_into(const Tensor& out, const Tensor& x, const Tensor& scale,
                            const Tensor& shift, double eps, const Tensor& weight = Tensor());
// rms_norm / rms_norm_modulate take a vector path when the last dim is a multiple of 8 (and at
// most 48 KiB), x, weight, scale and shift are f32 or bf16, 16-byte aligned with unit stride along
// the last dim (scale/shift: any broadcast of the leading dims, offsets multiples of 8 elements):
// the row is staged in shared memory with 16-byte loads, summed in the general kernel's order
// and written with 16-byte stores, bit-identical to the general path. Whether that path is taken
// for these arguments (for the tests):
bool rms_norm_vectorised(const Tensor& x, const Tensor& weight);
bool rms_norm_modulate_vectorised(const Tensor& x, const ops::Summed& scale,
                                  const ops::Summed& shift);
// x [N, C, *spatial]: one block per (n, group), statistics in double (groups can hold millions
// of elements); correctness first: only N * num_groups blocks.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps);

}  // namespace ltx::cuda
