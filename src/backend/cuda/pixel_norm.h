#pragma once
// PixelNorm on CUDA (ops::rms_norm_dim and its SiLU / bias / residual fusions, src/ops/norm.h;
// pixel_norm.cu): the VAE's normalisation over the channel dim.
#include "core/tensor.h"

namespace ltx::cuda {

// PixelNorm over `dim` (no affine): y = x / rms, rms = float(sqrt(ss / d + eps)) with the sum of
// squares ss in double in one fixed order (element r into partial (r / 8) % 32, each partial in
// increasing r, then a pairwise tree over the 32 partials; pixel_norm.cu describes it), so every
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

}  // namespace ltx::cuda
