// CUDA shape ops (pad, repeat, repeat_interleave, flip, index_select, gather, embedding, concat,
// stack) against the CPU ops: they only move bytes, so results are compared bit for bit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/storage.h"
#include "cuda/cuda_test_util.h"
#include "ops/shape.h"
#include "support/test_support.h"

namespace ltx::shape_test {
namespace {

using ops::PadMode;
using test::kGpu;
using test::same_bytes;

Tensor gpu(const Tensor& t) { return t.to(kGpu); }

TEST(CudaShape, PadEveryModeMatchesCpu) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({2, 3, 5, 7}, 1);
  const std::vector<std::vector<int64_t>> pads = {
      {1, 2}, {0, 0, 3, 0}, {2, 2, 1, 4}, {-1, 2, 1, -2}};
  for (PadMode mode :
       {PadMode::Constant, PadMode::Reflect, PadMode::Replicate, PadMode::Circular}) {
    for (const auto& p : pads) {
      SCOPED_TRACE(std::to_string(static_cast<int>(mode)) + " " + Dims(p).str());
      const double value = mode == PadMode::Constant ? 1.5 : 0.0;
      for (DType dt : {DType::F32, DType::BF16, DType::I64}) {
        const Tensor xt = x.to(dt);
        EXPECT_TRUE(same_bytes(ops::pad(test::non_contiguous_copy(gpu(xt)), p, mode, value),
                               ops::pad(xt, p, mode, value)))
            << dtype_name(dt);
      }
    }
  }
}

// A pad on the GPU computes its source indices in the kernel: a waveform's long time axis
// (the vocoder pads it twice per activation) uploads no index map, and so never waits for the
// stream as a pageable upload does.
TEST(CudaShape, PadMakesNoHostTensor) {
  LTX_REQUIRE_CUDA();
  const Tensor x = gpu(test::random_tensor({1, 4, 100000}, 3));
  const AllocationCounts before = allocation_counts();
  const Tensor y = ops::pad(x, {5, 6}, PadMode::Replicate);
  const AllocationCounts after = allocation_counts();
  EXPECT_EQ(after.host, before.host);
  EXPECT_EQ(after.cuda, before.cuda + 1);
  EXPECT_EQ(y.shape(), (Shape{1, 4, 100011}));
}

TEST(CudaShape, RepeatInterleaveFlipMatchCpu) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({3, 4, 5}, 2).to(DType::BF16);
  const Tensor xg = test::non_contiguous_copy(gpu(x));
  EXPECT_TRUE(same_bytes(ops::repeat(xg, {2, 1, 3}), ops::repeat(x, {2, 1, 3})));
  EXPECT_TRUE(same_bytes(ops::repeat(xg, {2, 1, 1, 2}), ops::repeat(x, {2, 1, 1, 2})));
  EXPECT_TRUE(same_bytes(ops::repeat_interleave(xg, 2, -1), ops::repeat_interleave(x, 2, -1)));
  EXPECT_TRUE(same_bytes(ops::repeat_interleave(xg, std::vector<int64_t>{0, 3, 1, 2}, 1),
                         ops::repeat_interleave(x, std::vector<int64_t>{0, 3, 1, 2}, 1)));
  EXPECT_TRUE(same_bytes(ops::flip(xg, {0, 2}), ops::flip(x, {0, 2})));
  EXPECT_TRUE(same_bytes(ops::flip(xg, {}), x));
}

TEST(CudaShape, IndexSelectGatherEmbeddingMatchCpu) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({6, 9, 4}, 3);
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{5, 0, 0, 3, 8}, {5});
  EXPECT_TRUE(same_bytes(ops::index_select(gpu(x), 1, gpu(idx)), ops::index_select(x, 1, idx)));
  EXPECT_TRUE(same_bytes(ops::index_select(gpu(x), 0, gpu(idx.narrow(0, 0, 2)).to(DType::I32)),
                         ops::index_select(x, 0, idx.narrow(0, 0, 2))));
  EXPECT_ERROR_HAS(ops::index_select(gpu(x), 0, gpu(idx)), "out of range");

  const Tensor gi = Tensor::from_vector(std::vector<int64_t>{1, 0, 2, 2, 1, 0}, {2, 3, 1});
  EXPECT_TRUE(same_bytes(ops::gather(gpu(x), 2, gpu(gi)), ops::gather(x, 2, gi)));
  EXPECT_TRUE(same_bytes(ops::gather(gpu(x), 0, gpu(gi)), ops::gather(x, 0, gi)));

  const Tensor table = test::random_tensor({10, 16}, 4).to(DType::BF16);
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{9, 1, 1, 0, 4, 7}, {2, 3});
  const Tensor e = ops::embedding(gpu(table), gpu(ids));
  EXPECT_EQ(e.shape(), Shape({2, 3, 16}));
  EXPECT_TRUE(same_bytes(e, ops::embedding(table, ids)));
}

TEST(CudaShape, ConcatAndStackStayOnTheDevice) {
  LTX_REQUIRE_CUDA();
  const Tensor a = test::random_tensor({2, 3}, 5), b = test::random_tensor({2, 5}, 6);
  const Tensor c = ops::concat({gpu(a), test::non_contiguous_copy(gpu(b))}, 1);
  EXPECT_EQ(c.device(), kGpu);
  EXPECT_TRUE(same_bytes(c, ops::concat({a, b}, 1)));
  EXPECT_TRUE(same_bytes(ops::stack({gpu(a), gpu(a)}, 1), ops::stack({a, a}, 1)));
}

}  // namespace
}  // namespace ltx::shape_test
