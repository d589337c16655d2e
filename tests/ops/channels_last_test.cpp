// Ops on channels-last (dense, permuted) tensors: results keep the layout and equal the
// contiguous computation bit for bit; conv3d_replicate_time is the pad + conv3d composition.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/tensor.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/resample.h"
#include "ops/shape.h"
#include "support/test_support.h"

namespace ltx {
namespace {

// x [2, 8, 3, 5, 7] in both layouts (same values).
struct Pair {
  Tensor contig, cl;
};
Pair pair(const Shape& s, uint64_t seed) {
  const Tensor x = test::random_tensor(s, seed);
  return {x, x.to_channels_last()};
}

void expect_same(const Tensor& got, const Tensor& want, bool channels_last, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(got.is_channels_last() && !got.is_contiguous(), channels_last)
      << what << ": strides " << got.strides().str();
  EXPECT_EQ(test::max_abs_diff(got, want), 0.0) << what;
}

TEST(ChannelsLast, UnaryAndScalarOpsKeepTheLayout) {
  const Pair x = pair({2, 8, 3, 5, 7}, 1);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops_list = {
      {"silu", [](const Tensor& t) { return ops::silu(t); }},
      {"exp", [](const Tensor& t) { return ops::exp(t); }},
      {"clamp", [](const Tensor& t) { return ops::clamp(t, -0.5, 0.25); }},
      {"mul scalar", [](const Tensor& t) { return ops::mul(t, 0.3); }},
      {"add scalar", [](const Tensor& t) { return ops::add(t, 1.0); }},
      {"pow", [](const Tensor& t) { return ops::pow(ops::abs(t), 1.5); }},
  };
  for (const auto& [name, fn] : ops_list) expect_same(fn(x.cl), fn(x.contig), true, name);
}

TEST(ChannelsLast, BinaryOpsKeepTheLayoutWithBroadcasts) {
  const Pair a = pair({2, 8, 3, 5, 7}, 2), b = pair({2, 8, 3, 5, 7}, 3);
  const Tensor per_channel = test::random_tensor({1, 8, 1, 1, 1}, 4);
  const Tensor per_sample_channel = test::random_tensor({2, 8, 1, 1, 1}, 5);
  const Tensor per_width = test::random_tensor({7}, 6);
  expect_same(ops::add(a.cl, b.cl), ops::add(a.contig, b.contig), true, "add cl+cl");
  expect_same(ops::mul(a.cl, per_channel), ops::mul(a.contig, per_channel), true, "mul channel");
  expect_same(ops::mul(per_channel, a.cl), ops::mul(per_channel, a.contig), true, "channel * x");
  expect_same(ops::sub(a.cl, per_sample_channel), ops::sub(a.contig, per_sample_channel), true,
              "sub sample-channel");
  expect_same(ops::div(a.cl, per_width), ops::div(a.contig, per_width), true, "div width");
  // Mixed layouts: the first dense full-shape operand decides.
  expect_same(ops::add(a.cl, b.contig), ops::add(a.contig, b.contig), true, "add cl+contig");
  expect_same(ops::add(a.contig, b.cl), ops::add(a.contig, b.contig), false, "add contig+cl");
  // A result of a larger (broadcast) shape than the channels-last input: contiguous.
  const Tensor big = test::random_tensor({3, 2, 8, 3, 5, 7}, 7);
  expect_same(ops::add(a.cl, big), ops::add(a.contig, big), false, "broadcast up");
}

TEST(ChannelsLast, FusedGlueOpsKeepTheLayout) {
  const Pair x = pair({2, 8, 3, 5, 7}, 8), y = pair({2, 8, 3, 5, 7}, 9);
  const Tensor scale = test::random_tensor({2, 8, 1, 1, 1}, 10);
  const Tensor shift = test::random_tensor({2, 8, 1, 1, 1}, 11);
  expect_same(ops::modulate(x.cl, scale, shift), ops::modulate(x.contig, scale, shift), true,
              "modulate");
  expect_same(ops::gated_add(x.cl, y.cl, scale), ops::gated_add(x.contig, y.contig, scale), true,
              "gated_add");
  expect_same(ops::silu_mul(x.cl, y.cl), ops::silu_mul(x.contig, y.contig), true, "silu_mul");
  expect_same(ops::lerp(x.cl, y.cl, 0.25), ops::lerp(x.contig, y.contig, 0.25), true, "lerp");
  expect_same(ops::where(ops::maximum(x.cl, 0.0), x.cl, y.cl),
              ops::where(ops::maximum(x.contig, 0.0), x.contig, y.contig), true, "where");
}

TEST(ChannelsLast, InPlaceOpsWriteThroughThePermutedLayout) {
  const Pair x = pair({2, 8, 3, 5, 7}, 12), y = pair({2, 8, 3, 5, 7}, 13);
  const Tensor bias = test::random_tensor({1, 8, 1, 1, 1}, 14);
  Tensor a = x.cl.clone().to_channels_last(), b = x.contig.clone();
  const void* before = a.raw_data();
  ops::add_(a, y.contig);  // mixed layouts
  ops::add_(b, y.contig);
  ops::mul_(a, bias);
  ops::mul_(b, bias);
  EXPECT_EQ(a.raw_data(), before);
  expect_same(a, b, true, "add_ / mul_");
  // Into a frame slice of a channels-last tensor.
  ops::add_(a.narrow(2, 1, 1), y.cl.narrow(2, 0, 1));
  ops::add_(b.narrow(2, 1, 1), y.contig.narrow(2, 0, 1));
  expect_same(a, b, true, "add_ into a frame slice");
}

TEST(ChannelsLast, RmsNormOverAStrideOneDimKeepsTheLayout) {
  const Pair x = pair({2, 16, 3, 5, 7}, 15);
  const Tensor got = ops::rms_norm_dim(x.cl, 1, 1e-8);
  expect_same(got, ops::rms_norm_dim(x.contig, 1, 1e-8), true, "pixel norm");
  // Narrowed frames of a channels-last batch (a view with gaps) and odd channel counts.
  const Pair odd = pair({3, 5, 4, 3, 1}, 16);
  expect_same(ops::rms_norm_dim(odd.cl.narrow(2, 1, 2), 1, 1e-6),
              ops::rms_norm_dim(odd.contig.narrow(2, 1, 2), 1, 1e-6), false, "gappy view");
  // Any permutation with the normalised dim innermost.
  const Tensor t = test::random_tensor({4, 6, 33}, 17);
  const Tensor p = t.permute({0, 2, 1}).contiguous().permute({0, 2, 1});  // dim 1 has stride 1
  const Tensor r = ops::rms_norm_dim(p, 1, 1e-6);
  EXPECT_EQ(r.strides(), p.strides());
  EXPECT_EQ(test::max_abs_diff(r, ops::rms_norm_dim(t, 1, 1e-6)), 0.0);
}

TEST(ChannelsLast, DepthToSpaceAndBackKeepTheLayout) {
  const Pair x = pair({2, 24, 3, 4, 5}, 18);
  const Tensor d = ops::depth_to_space(x.cl, {2, 2, 2}, {0, 1, 2});
  expect_same(d, ops::depth_to_space(x.contig, {2, 2, 2}, {0, 1, 2}), true, "depth_to_space");
  const Tensor u = ops::depth_to_space(x.cl, {1, 2, 2}, {0, 2, 1});
  expect_same(u, ops::depth_to_space(x.contig, {1, 2, 2}, {0, 2, 1}), true, "unpatchify-like");
  const Tensor s = ops::space_to_depth(d, {2, 2, 2}, {0, 1, 2});
  expect_same(s, x.contig, true, "space_to_depth inverts it");
  const Tensor s2 = ops::space_to_depth(u, {1, 2, 2}, {0, 2, 1});
  expect_same(s2, x.contig, true, "patchify-like");
  // Sub-positions outside the channels (the VAE upsample convs' permuted outputs), as a batch.
  const Tensor outer = ops::depth_to_space(x.cl, {2, 2, 2}, {0, 1, 2}, ops::Subpositions::Outer);
  expect_same(outer,
              ops::depth_to_space(x.contig, {2, 2, 2}, {0, 1, 2}, ops::Subpositions::Outer), true,
              "depth_to_space, sub-positions outer");
}

// The public op against an explicit replicate pad + conv3d (the CPU path is that composition).
TEST(ConvReplicateTime, MatchesPadThenConvOnOddSizes) {
  struct Case {
    Shape x, w;
    ops::ConvArg<3> stride;
    ops::ConvArg<2> padding;
    int64_t front, back;
  };
  const std::vector<Case> cases = {
      {{1, 3, 5, 7, 6}, {4, 3, 3, 3, 3}, {1, 1, 1}, {1, 1}, 1, 1},  // non-causal 3x3x3
      {{2, 3, 1, 5, 5}, {2, 3, 3, 3, 3}, {1, 1, 1}, {1, 1}, 1, 1},  // T = 1
      {{2, 2, 2, 4, 3}, {3, 2, 3, 3, 1}, {1, 1, 1}, {1, 0}, 1, 1},  // T = 2, 3x3x1 kernel
      {{1, 3, 4, 5, 6}, {5, 3, 3, 3, 3}, {1, 1, 1}, {1, 1}, 2, 0},  // causal: front k - 1
      {{1, 2, 3, 6, 5}, {2, 2, 3, 1, 3}, {2, 2, 1}, {0, 1}, 0, 2},  // strides, back only
      {{1, 2, 5, 3, 3}, {3, 2, 5, 3, 3}, {1, 1, 1}, {1, 1}, 2, 2},  // k_t = 5
      {{1, 2, 3, 3, 3}, {3, 2, 1, 1, 1}, {1, 1, 1}, {0, 0}, 0, 0},  // pointwise, no pads
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    const Tensor x = test::random_tensor(c.x, ++seed), w = test::random_tensor(c.w, ++seed);
    const Tensor b = test::random_tensor({c.w[0]}, ++seed);
    const Tensor want = ops::conv3d(
        ops::pad(x, {0, 0, 0, 0, c.front, c.back}, ops::PadMode::Replicate), w, b, c.stride,
        {0, c.padding[0], c.padding[1]});
    const Tensor got = ops::conv3d_replicate_time(x, w, b, c.stride, c.padding, c.front, c.back);
    ASSERT_EQ(got.shape(), want.shape()) << c.x.str();
    EXPECT_EQ(test::max_abs_diff(got, want), 0.0) << c.x.str() << " pads " << c.front << "/" << c.back;
    // Without a bias, and on a non-contiguous input.
    const Tensor nc = test::non_contiguous_copy(x);
    EXPECT_EQ(test::max_abs_diff(
                  ops::conv3d_replicate_time(nc, w, Tensor(), c.stride, c.padding, c.front, c.back),
                  ops::conv3d(ops::pad(x, {0, 0, 0, 0, c.front, c.back}, ops::PadMode::Replicate),
                              w, Tensor(), c.stride, {0, c.padding[0], c.padding[1]})),
              0.0);
  }
}

TEST(ConvReplicateTime, RejectsBadArguments) {
  const Tensor x = Tensor::zeros({1, 2, 3, 4, 4}), w = Tensor::zeros({2, 2, 3, 3, 3});
  EXPECT_ERROR_HAS(ops::conv3d_replicate_time(x, w, Tensor(), {1, 1, 1}, {1, 1}, -1, 1),
                   "temporal pads");
  EXPECT_ERROR_HAS(ops::conv3d_replicate_time(x.select(0, 0), w, Tensor(), {1, 1, 1}, {1, 1}, 1, 1),
                   "conv3d_replicate_time");
  EXPECT_ERROR_HAS(ops::conv3d_replicate_time(Tensor::zeros({1, 2, 0, 4, 4}), w, Tensor(),
                                              {1, 1, 1}, {1, 1}, 1, 1),
                   "empty");
  EXPECT_ERROR_HAS(ops::conv3d_replicate_time(x, Tensor::zeros({2, 3, 3, 3, 3}), Tensor(),
                                              {1, 1, 1}, {1, 1}, 1, 1),
                   "conv3d");
}

}  // namespace
}  // namespace ltx
