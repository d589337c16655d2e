// Dense permuted layouts: dim_order / is_dense / empty_in_order / contiguous_in_order /
// channels-last helpers and the elementwise result-layout rule (empty_like_layout).
#include <gtest/gtest.h>

#include "core/tensor.h"
#include "support/test_support.h"

namespace ltx {
namespace {

TEST(Layout, ChannelsLastOrderListsChannelsLast) {
  EXPECT_EQ(Tensor::channels_last_order(5), (std::vector<int64_t>{0, 2, 3, 4, 1}));
  EXPECT_EQ(Tensor::channels_last_order(4), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(Tensor::channels_last_order(3), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_ERROR_HAS(Tensor::channels_last_order(2), "channels-last");
}

TEST(Layout, EmptyInOrderHasPermutedDenseStrides) {
  const Tensor t = Tensor::empty_in_order({2, 3, 4, 5, 6}, Tensor::channels_last_order(5));
  EXPECT_EQ(t.strides(), Strides({360, 1, 90, 18, 3}));
  EXPECT_TRUE(t.is_dense());
  EXPECT_TRUE(t.is_channels_last());
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.dim_order(), Tensor::channels_last_order(5));
  EXPECT_ERROR_HAS(Tensor::empty_in_order({2, 3}, {0, 0}), "permutation");
  EXPECT_ERROR_HAS(Tensor::empty_in_order({2, 3}, {0}), "every dim");
}

TEST(Layout, DenseDetectsPermutationsButNotGapsOrBroadcasts) {
  const Tensor c = Tensor::zeros({3, 4, 5});
  EXPECT_TRUE(c.is_dense());
  EXPECT_EQ(c.dim_order(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(c.permute({2, 0, 1}).is_dense());
  EXPECT_EQ(c.permute({2, 0, 1}).dim_order(), (std::vector<int64_t>{1, 2, 0}));
  EXPECT_FALSE(c.narrow(1, 0, 2).is_dense());
  EXPECT_FALSE(Tensor::zeros({3, 1}).expand({3, 4}).is_dense());
  // Size-1 dims never matter.
  EXPECT_TRUE(Tensor::empty_in_order({1, 8, 1, 2, 3}, Tensor::channels_last_order(5)).is_dense());
  EXPECT_TRUE(c.is_dense_in_order({0, 1, 2}));
  EXPECT_FALSE(c.is_dense_in_order({1, 0, 2}));
  EXPECT_TRUE(Tensor::zeros({1, 4}).is_dense_in_order({1, 0}));
}

TEST(Layout, ContiguousInOrderCopiesOnlyWhenNeeded) {
  const Tensor x = test::random_tensor({2, 3, 4, 5, 6}, 1);
  const Tensor cl = x.to_channels_last();
  EXPECT_TRUE(cl.is_channels_last());
  EXPECT_EQ(test::max_abs_diff(cl, x), 0.0);
  EXPECT_EQ(cl.to_channels_last().raw_data(), cl.raw_data());  // already: no copy
  const Tensor back = cl.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_EQ(test::max_abs_diff(back, x), 0.0);
  // A non-dense source (a narrowed channels-last view) is copied into the requested order.
  const Tensor part = cl.narrow(2, 1, 2);
  const Tensor dense = part.to_channels_last();
  EXPECT_TRUE(dense.is_channels_last());
  EXPECT_EQ(test::max_abs_diff(dense, x.narrow(2, 1, 2)), 0.0);
  // Batch 1: a frame slice of a channels-last tensor is still dense channels-last (no copy).
  const Tensor one = x.narrow(0, 0, 1).to_channels_last();
  EXPECT_EQ(one.narrow(2, 1, 2).to_channels_last().raw_data(), one.narrow(2, 1, 2).raw_data());
}

TEST(Layout, EmptyLikeLayoutFollowsTheFirstDenseFullShapeInput) {
  const Tensor cl = Tensor::empty_in_order({2, 8, 3, 4, 5}, Tensor::channels_last_order(5));
  const Tensor contig = Tensor::zeros({2, 8, 3, 4, 5});
  const Tensor bias = Tensor::zeros({1, 8, 1, 1, 1});
  const Shape s = cl.shape();
  EXPECT_TRUE(empty_like_layout(s, DType::F32, Device::cpu(), {&cl}).is_channels_last());
  // Inputs of another shape (a broadcast per-channel tensor) are skipped.
  EXPECT_TRUE(empty_like_layout(s, DType::F32, Device::cpu(), {&bias, &cl}).is_channels_last());
  // The first dense full-shape input decides: a contiguous one first gives contiguous.
  EXPECT_TRUE(empty_like_layout(s, DType::F32, Device::cpu(), {&contig, &cl}).is_contiguous());
  EXPECT_TRUE(empty_like_layout(s, DType::F32, Device::cpu(), {&cl, &contig}).is_channels_last());
  // A non-dense input does not count; nothing left: contiguous.
  const Tensor gappy = Tensor::zeros({2, 8, 3, 4, 10}).narrow(4, 0, 5);
  EXPECT_TRUE(empty_like_layout(s, DType::F32, Device::cpu(), {&gappy}).is_contiguous());
  EXPECT_TRUE(empty_like_layout(s, DType::BF16, Device::cpu(), {&gappy, &cl}).is_channels_last());
  EXPECT_EQ(empty_like_layout(s, DType::BF16, Device::cpu(), {&cl}).dtype(), DType::BF16);
  EXPECT_TRUE(empty_like_layout(s, DType::F32, Device::cpu(), {nullptr}).is_contiguous());
}

// broadcasts_to: fewer or as many dims, each equal or 1, against the target itself (not the
// two-way broadcast of broadcast_shapes, which would also grow the target).
TEST(Layout, BroadcastsToAcceptsOnlyShapesThatExpandToTheTarget) {
  const Shape target{2, 17, 40};
  EXPECT_TRUE(broadcasts_to(Shape{2, 17, 40}, target));
  EXPECT_TRUE(broadcasts_to(Shape{40}, target));
  EXPECT_TRUE(broadcasts_to(Shape{2, 1, 40}, target));
  EXPECT_TRUE(broadcasts_to(Shape{1, 1, 1}, target));
  EXPECT_TRUE(broadcasts_to(Shape{}, target));
  EXPECT_FALSE(broadcasts_to(Shape{2, 17, 39}, target));
  EXPECT_TRUE(broadcasts_to(Shape{17, 1}, target));  // right-aligned: 17 vs 17, 1 vs 40
  EXPECT_FALSE(broadcasts_to(Shape{2, 40}, target));  // 2 vs 17
  EXPECT_FALSE(broadcasts_to(Shape{1, 2, 17, 40}, target));  // more dims
  EXPECT_FALSE(broadcasts_to(Shape{2, 17, 40}, Shape{2, 1, 40}));  // would grow the target
}

}  // namespace
}  // namespace ltx
