#pragma once
// CUDA normalisations (src/ops/norm.h semantics). x f32 or bf16 (any strides; non-contiguous
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
// rms_norm / rms_norm_modulate take a vector path when the last dim is a multiple of 8 (and at
// most 48 KiB), x, weight, scale and shift are f32 or bf16, 16-byte aligned with unit stride along
// the last dim (scale/shift: any broadcast of the leading dims, offsets multiples of 8 elements):
// the row is staged in shared memory with 16-byte loads, summed in the general kernel's order
// and written with 16-byte stores, bit-identical to the general path. Whether that path is taken
// for these arguments (for the tests):
bool rms_norm_vectorised(const Tensor& x, const Tensor& weight);
bool rms_norm_modulate_vectorised(const Tensor& x, const ops::Summed& scale,
                                  const ops::Summed& shift);
// PixelNorm over `dim` (no affine): y = x / rms, rms = float(sqrt(ss / d + eps)) with the sum of
// squares ss in double in one fixed order (element r into partial (r / 8) % 32, each partial in
// increasing r, then a pairwise tree over the 32 partials; norm.cu describes it), so every
// kernel gives the same bits. When `dim` is innermost in memory with stride 1 (a channels-last
// activation with dim = 1, a view with gaps made dense in its order first; or the last
// non-trivial dim) a warp per row reads it (16-byte vectors when d % 8 == 0 and the rows are
// aligned) and the result keeps x's layout; otherwise one thread per position sums its column.
// silu: every kernel applies ops::silu's function at its store, to the value rounded to x's dtype
// (ops::rms_norm_dim_silu, bit-identical to the two ops).
// pre_bias (optional, x.size(dim) values of x's dtype; only with silu and where
// rms_norm_dim_bias_fuses): normalises x + pre_bias, the sum rounded to x's dtype as ops::add
// stores it, adding it in the channels-last vector kernel as rows are loaded.
Tensor rms_norm_dim(const Tensor& x, int dim, double eps, bool silu = false,
                    const Tensor& pre_bias = {});
// Whether the vector row kernel takes x with the pre-norm bias (ops::rms_norm_dim_silu adds the
// bias first otherwise).
bool rms_norm_dim_bias_fuses(const Tensor& x, int dim, const Tensor& bias);
// The VAE ResNet block's skip and the next PixelNorm + SiLU in one pass (ops::
// add_then_add_rms_norm_dim_silu_): x = (x + bias) + residual in place, each sum rounded to bf16,
// and returns the SiLU of its PixelNorm over dim (rms_norm_dim(x, dim, eps, true) of the sum), in
// the channels-last vector kernel, where rms_norm_dim_residual_fuses.
Tensor rms_norm_dim_silu_residual_(const Tensor& x, int dim, double eps, const Tensor& bias,
                                   const Tensor& residual);
// rms_norm_dim_bias_fuses, bf16 rows of at most 1024 values, and a residual of x's shape, strides
// and dtype that does not overlap x.
bool rms_norm_dim_residual_fuses(const Tensor& x, int dim, const Tensor& bias,
                                 const Tensor& residual);
// Whether rms_norm_dim takes the row kernel for x (for the tests).
bool rms_norm_dim_rows_layout(const Tensor& x, int dim);
// x [N, C, *spatial]: one block per (n, group), statistics in double (groups can hold millions
// of elements); correctness first: only N * num_groups blocks.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps);

}  // namespace ltx::cuda
