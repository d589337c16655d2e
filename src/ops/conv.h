#pragma once
// Convolutions with torch.nn.functional semantics (f32; zero padding only, as in F.convNd).
// Other padding modes and asymmetric/causal padding are pad() (ops/shape.h) followed by a conv
// that zero-pads only the remaining dims, e.g. the video VAE's causal CausalConv3d with kernel k:
//   conv3d(pad(x, {0, 0, 0, 0, k - 1, 0}, PadMode::Replicate), w, b, {1, 1, 1}, {0, k/2, k/2})
// and the audio VAE's CausalConv2d: conv2d(pad(x, {wl, wr, h, 0}), w, b, stride, {0, 0}, dilation).
// Per-dim arguments are std::array<int64_t, R> for R = 1, 2, 3 spatial dims (call with braces,
// e.g. {2, 2}); a 1-D call reads conv1d(x, w, b, {stride}, {padding}, {dilation}, groups).
#include <array>
#include <cstdint>

#include "core/tensor.h"
#include "op_types/conv.h"

namespace ltx::ops {

template <size_t R>
using ConvArg = std::array<int64_t, R>;

// x [N, C, *spatial], weight [O, C / groups, *kernel], bias [O] or undefined.
//   out[n, o, p] = bias[o] + sum_{c in group(o), k} w[o, c, k] * xp[n, c, p * stride + k * dilation]
// where xp is x zero-padded by `padding` on both sides of each spatial dim; output size per dim
// (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const ConvArg<1>& stride = {1}, const ConvArg<1>& padding = {0},
              const ConvArg<1>& dilation = {1}, int64_t groups = 1);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const ConvArg<2>& stride = {1, 1}, const ConvArg<2>& padding = {0, 0},
              const ConvArg<2>& dilation = {1, 1}, int64_t groups = 1);
Tensor conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              const ConvArg<3>& stride = {1, 1, 1}, const ConvArg<3>& padding = {0, 0, 0},
              const ConvArg<3>& dilation = {1, 1, 1}, int64_t groups = 1);

// The video VAE's CausalConv3d with its temporal replicate padding folded in:
//   conv3d(pad(x, {0, 0, 0, 0, pad_front, pad_back}, PadMode::Replicate), weight, bias, stride,
//          {0, padding[0], padding[1]})
// i.e. pad_front copies of frame 0 in front, pad_back copies of frame T - 1 behind, zero padding
// `padding` (height, width) in space. The CPU (and any case below) runs exactly that composition.
// CUDA bf16 with pad_front == pad_back == k_t / 2 and temporal stride 1 (the non-causal 3x3x3
// convs) runs without the padded copy (cuda::cudnn_conv3d_replicate_time): not bit-identical to
// the composition, the boundary frames add in one more bf16 rounding (relative L2 error of order
// 1e-3; tests bound it by 8e-3). Channels-last inputs give channels-last results there.
// x is taken by value: pass std::move(x) when it is the last use, so that the composition frees it
// once the padded copy exists (as CausalConv3d always did).
// residual (optional, the conv output's shape): returns conv + bias + residual, added in that
// order with each sum rounded (the ResNet block's `input + conv2(h)`); on CUDA the bias and the
// residual go in one pass over the output.
Tensor conv3d_replicate_time(Tensor x, const Tensor& weight, const Tensor& bias,
                             const ConvArg<3>& stride, const ConvArg<2>& padding,
                             int64_t pad_front, int64_t pad_back, const Tensor& residual = {});

// torch.nn.functional.conv_transpose1d (argument order as in torch): x [N, C, L],
// weight [C, O / groups, K], bias [O] or undefined. Output length
//   (L - 1) * stride - 2 * padding + dilation * (K - 1) + output_padding + 1,
// out[n, o, i * stride - padding + k * dilation] += w[c, o, k] * x[n, c, i] (+ bias[o]).
// output_padding must be smaller than stride or dilation.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        const ConvArg<1>& stride = {1}, const ConvArg<1>& padding = {0},
                        const ConvArg<1>& output_padding = {0}, int64_t groups = 1,
                        const ConvArg<1>& dilation = {1});

// The transposed conv of spec.rank (1-3) spatial dims, of which conv_transpose1d is the 1-D form
// (no conv_transpose2d / 3d op yet): x [N, C, *spatial], weight [C, O / groups, *kernel], bias
// [O] or undefined, per dim the stride, padding, dilation and output_padding of `spec`, checked
// as conv_transpose1d checks its own. CUDA runs it as the equivalent forward conv (conv.cpp).
Tensor conv_transpose_nd(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const ConvSpec& spec);

}  // namespace ltx::ops
