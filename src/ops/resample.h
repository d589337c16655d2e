#pragma once
// Resampling ops with torch semantics: interpolation (f32; f32 or bf16 on CUDA) and channel <->
// space rearrangements (any dtype, any device: they are views plus one copy).
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "op_types/resample.h"

namespace ltx::ops {

// torch.nn.functional.interpolate(x, size=output_size, mode, align_corners) on x [N, C, *spatial]
// with 1-3 spatial dims, f32. output_size has one entry per spatial dim (or one for all).
// align_corners is only valid for Linear (as in torch). The scale used for source indices is
// in/out (torch's size-given rule).
Tensor interpolate(const Tensor& x, const std::vector<int64_t>& output_size, InterpMode mode,
                   bool align_corners = false);
// torch.nn.functional.interpolate(x, scale_factor=scale_factors, mode, align_corners) with
// recompute_scale_factor unset: out = floor(in * factor), and Nearest/NearestExact/Linear (without
// align_corners) map indices with 1/factor instead of in/out, exactly like torch. Area ignores the
// factor beyond the output size. One factor per spatial dim (or one for all).
Tensor interpolate_scale(const Tensor& x, const std::vector<double>& scale_factors, InterpMode mode,
                         bool align_corners = false);

// Channel -> space ("depth to space") for R = factors.size() in {1, 2, 3} trailing spatial dims:
//   x [N, C * f_0 * ... * f_{R-1}, S_0, ..., S_{R-1}] -> [N, C, S_0 * f_0, ..., S_{R-1} * f_{R-1}],
//   out[n, c, s_0 * f_0 + q_0, ...] = x[n, c * F + sub, s_0, ...],  F = f_0 * ... * f_{R-1},
// where `sub` packs the sub-positions q_i as digits, most significant first, in the order of
// the spatial axes listed in channel_order (a permutation of 0..R-1; empty = 0, 1, ..., R-1).
// In einops terms, with p_i the factor of spatial axis i:
//   channel_order {0, 1, 2}: "b (c p0 p1 p2) d h w -> b c (d p0) (h p1) (w p2)"
//     (video VAE DepthToSpaceUpsample, upsampler PixelShuffleND(3); {0, 1} is PixelShuffleND(2))
//   channel_order {0, 2, 1}: "b (c p r q) f h w -> b c (f p) (h q) (w r)" (VAE unpatchify, 3-D)
//   channel_order {1, 0}:    "b (c r q) h w -> b c (h q) (w r)"           (VAE unpatchify, 2-D)
// Factors of 1 are allowed (PixelShuffleND(1) is factors {p, 1, 1}). Both ops make one copy; a
// channels-last input (Tensor::is_channels_last, not contiguous) gives a channels-last result,
// anything else a contiguous one.
//
// `subpositions` says where `sub` sits in the input's channel index: Inner (the reference's
// "(c p0 p1 p2)") is c * F + sub; Outer ("(p0 p1 p2 c)") is sub * C + c, for a conv whose output
// channels were permuted that way at load (permute_depth_channels): on a channels-last input the
// copy then moves runs of C contiguous channels on both sides (16-byte words) instead of
// gathering each channel at a stride of F.
enum class Subpositions { Inner, Outer };
Tensor depth_to_space(const Tensor& x, const std::vector<int64_t>& factors,
                      const std::vector<int64_t>& channel_order = {},
                      Subpositions subpositions = Subpositions::Inner);
// The [C * F, ...] channel rows of w (a conv weight or bias, output channels first) reordered
// from c * F + sub to sub * C + c: with it a conv's output feeds depth_to_space(..., Outer) and
// gives the same tensor as the original conv with Inner.
Tensor permute_depth_channels(const Tensor& w, int64_t F);
// The exact inverse of depth_to_space with the same factors and channel_order:
//   x [N, C, S_0 * f_0, ...] -> [N, C * F, S_0, ...]
// e.g. channel_order {0, 1, 2}: "b c (d p0) (h p1) (w p2) -> b (c p0 p1 p2) d h w" (VAE
// SpaceToDepthDownsample), {0, 2, 1}: VAE patchify "b c (f p) (h q) (w r) -> b (c p r q) f h w".
Tensor space_to_depth(const Tensor& x, const std::vector<int64_t>& factors,
                      const std::vector<int64_t>& channel_order = {});

// torch.nn.functional.pixel_shuffle: [*, C * r * r, H, W] -> [*, C, H * r, W * r] with
// out[..., c, h * r + i, w * r + j] = x[..., c * r * r + i * r + j, h, w].
Tensor pixel_shuffle(const Tensor& x, int64_t r);
// torch.nn.functional.pixel_unshuffle: the inverse, [*, C, H * r, W * r] -> [*, C * r * r, H, W].
Tensor pixel_unshuffle(const Tensor& x, int64_t r);

}  // namespace ltx::ops
