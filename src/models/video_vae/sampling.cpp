#include "models/video_vae/sampling.h"

#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/resample.h"
#include "ops/shape.h"

namespace ltx::models::video_vae {

namespace {
int64_t prod(const std::array<int64_t, 3>& s) { return s[0] * s[1] * s[2]; }
std::vector<int64_t> factors(const std::array<int64_t, 3>& s) { return {s[0], s[1], s[2]}; }
}  // namespace

SpaceToDepthDownsample SpaceToDepthDownsample::load(io::WeightMap& w, int64_t in_channels,
                                                    int64_t out_channels,
                                                    std::array<int64_t, 3> stride,
                                                    PaddingMode padding,
                                                    const nn::LoadOptions& opt) {
  const int64_t p = prod(stride);
  LTX_CHECK(out_channels % p == 0 && (in_channels * p) % out_channels == 0,
            "SpaceToDepthDownsample: ", in_channels, " -> ", out_channels,
            " channels do not fit the stride product ", p);
  SpaceToDepthDownsample d;
  d.stride = stride;
  d.group_size = in_channels * p / out_channels;
  d.conv = CausalConv3d::load(w, "conv", in_channels, out_channels / p, 3, {1, 1, 1}, padding, opt);
  return d;
}

Tensor SpaceToDepthDownsample::operator()(Tensor x, bool causal) const {
  if (stride[0] == 2) x = ops::concat({x.narrow(2, 0, 1), x}, 2);
  LTX_CHECK(x.size(2) % stride[0] == 0 && x.size(3) % stride[1] == 0 && x.size(4) % stride[2] == 0,
            "SpaceToDepthDownsample: ", x.describe(), " is not divisible by the stride (",
            stride[0], ", ", stride[1], ", ", stride[2], ")");
  // Skip path: "b c (d p1) (h p2) (w p3) -> b (c p1 p2 p3) d h w", then the mean over groups.
  Tensor skip = ops::space_to_depth(x, factors(stride), {0, 1, 2});
  const Shape s = skip.shape();
  skip = ops::mean(skip.view({s[0], s[1] / group_size, group_size, s[2], s[3], s[4]}), {2});
  Tensor h = ops::space_to_depth(conv(std::move(x), causal), factors(stride), {0, 1, 2});
  ops::add_(h, skip);
  return h;
}

DepthToSpaceUpsample DepthToSpaceUpsample::load(io::WeightMap& w, int64_t in_channels,
                                                std::array<int64_t, 3> stride, bool residual,
                                                int64_t reduction, PaddingMode padding,
                                                const nn::LoadOptions& opt) {
  const int64_t p = prod(stride);
  LTX_CHECK((p * in_channels) % reduction == 0, "DepthToSpaceUpsample: ", p, " x ", in_channels,
            " channels are not divisible by the multiplier ", reduction);
  LTX_CHECK(!residual || (in_channels % p == 0 && p % reduction == 0),
            "DepthToSpaceUpsample: the residual path needs in_channels (", in_channels,
            ") divisible by ", p, " and ", p, " divisible by the multiplier ", reduction);
  DepthToSpaceUpsample u;
  u.stride = stride;
  u.residual = residual;
  u.reduction = reduction;
  u.conv = CausalConv3d::load(w, "conv", in_channels, p * in_channels / reduction, 3, {1, 1, 1},
                              padding, opt);
  // The conv's output channels as "(p1 p2 p3 c)" instead of the checkpoint's "(c p1 p2 p3)": the
  // same values, but on channels-last activations the depth-to-space copy then moves whole runs
  // of c channels (the gather at a stride of p costs ~45 ms of the 1536 x 1024 decode,
  // bench/RESULTS.md).
  u.conv.permute_output_channels(p);
  return u;
}

int64_t DepthToSpaceUpsample::out_channels() const { return conv.in_channels() / reduction; }

Tensor DepthToSpaceUpsample::operator()(Tensor x, bool causal) const {
  Tensor skip;
  if (residual) {
    skip = ops::depth_to_space(x, factors(stride), {0, 1, 2});
    // Tensor.repeat along channels: the whole block tiled ([A, B, A, B]), not interleaved.
    skip = ops::repeat(skip, {1, prod(stride) / reduction, 1, 1, 1});
    if (stride[0] == 2) skip = skip.narrow(2, 1, skip.size(2) - 1);
  }
  Tensor h = ops::depth_to_space(conv(std::move(x), causal), factors(stride), {0, 1, 2},
                                 ops::Subpositions::Outer);
  if (stride[0] == 2) h = h.narrow(2, 1, h.size(2) - 1);
  if (residual) ops::add_(h, skip);  // h is fresh: a view of its own storage
  return h;
}

}  // namespace ltx::models::video_vae
