#pragma once
// The latent upsampler's ResBlock (reference: model/upsampler/res_block.py): zero-padded
// (non-causal) 3x3(x3) convs, GroupNorm(32, eps 1e-5):
//   silu(norm2(conv2(silu(norm1(conv1(x))))) + x)
#include <cstdint>

#include "core/tensor.h"
#include "io/weights.h"
#include "nn/module.h"

namespace ltx::models::upsampler {

// A zero-padded kxk(xk) conv of the upsampler: Conv3d (dims 3) or, run per frame, Conv2d (dims 2,
// stored [O, C, k, k] and applied to [B, C, F, H, W] as a 1xkxk Conv3d, the same sums).
struct Conv {
  Tensor weight;  // [O, C, k, k, k] or [O, C, 1, k, k] (2-D kernels, unsqueezed)
  Tensor bias;    // [O]
  // Binds `<name>.{weight,bias}`; `dims` 2 or 3 is the rank of the stored kernel.
  static Conv load(io::WeightMap& w, const std::string& name, int64_t in_channels,
                   int64_t out_channels, int64_t kernel, int dims, const nn::LoadOptions& opt);
  // x [B, C, F, H, W] -> [B, O, F, H, W], padding kernel / 2 (zeros; none in time for 2-D kernels).
  Tensor operator()(const Tensor& x) const;
};

// torch.nn.GroupNorm(32, C) on [B, C, F, H, W]; `per_frame` normalises every frame on its own
// (the dims-2 upsampler folds frames into the batch).
Tensor group_norm_32(const Tensor& x, const Tensor& weight, const Tensor& bias, bool per_frame);

struct ResBlock {
  Conv conv1, conv2;
  Tensor norm1_weight, norm1_bias, norm2_weight, norm2_bias;
  bool per_frame = false;  // dims 2

  static ResBlock load(io::WeightMap& w, int64_t channels, int dims, const nn::LoadOptions& opt);
  Tensor operator()(const Tensor& x) const;
};

}  // namespace ltx::models::upsampler
