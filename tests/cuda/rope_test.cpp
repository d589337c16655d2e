// CUDA rotary embeddings against the CPU op: bit-identical in f32 (two rounded products and one
// rounded sum per output on both backends).
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_test_util.h"
#include "ops/rope.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using ops::RopeLayout;
using test::kGpu;
using test::same_bytes;

Tensor gpu(const Tensor& t) { return t.to(kGpu); }

TEST(CudaRope, SplitAndInterleavedAreBitIdenticalToCpu) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 1;
  for (RopeLayout layout : {RopeLayout::Split, RopeLayout::Interleaved}) {
    const bool split = layout == RopeLayout::Split;
    for (int64_t d : {2, 16, 32, 64, 128}) {
      SCOPED_TRACE(std::string(split ? "split" : "interleaved") + " d " + std::to_string(d));
      const int64_t w = split ? d / 2 : d;
      // [B, T, H, D] stored, viewed as [B, H, T, D] (the attention layout).
      const Tensor stored = test::random_tensor({2, 7, 3, d}, seed++);
      const Tensor x = stored.transpose(1, 2), xg = gpu(stored).transpose(1, 2);
      for (const Shape& cs : {Shape{2, 3, 7, w}, Shape{2, 1, 7, w}, Shape{7, w}}) {
        const Tensor c = test::random_tensor(cs, seed++), s = test::random_tensor(cs, seed++);
        const Tensor want = ops::apply_rope(x, c, s, layout);
        const Tensor got = ops::apply_rope(xg, test::non_contiguous_copy(gpu(c)), gpu(s), layout);
        EXPECT_EQ(got.device(), kGpu);
        EXPECT_TRUE(same_bytes(got, want)) << cs.str();
      }
    }
  }
}

TEST(CudaRope, Bf16InputsRoundTheF32Result) {
  LTX_REQUIRE_CUDA();
  const Tensor x = test::random_tensor({2, 9, 64}, 50).to(DType::BF16);
  const Tensor c = test::random_tensor({9, 32}, 51), s = test::random_tensor({9, 32}, 52);
  const Tensor got = ops::apply_rope(gpu(x), gpu(c), gpu(s), RopeLayout::Split);
  EXPECT_EQ(got.dtype(), DType::BF16);
  EXPECT_TRUE(same_bytes(
      got, ops::apply_rope(x.to(DType::F32), c, s, RopeLayout::Split).to(DType::BF16)));
}

}  // namespace
}  // namespace ltx
