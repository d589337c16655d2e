// CUDA rotary embeddings against the CPU op: bit-identical in f32 (two rounded products and one
// rounded sum per output on both backends).
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/rope.h"
#include "cuda/cuda_test_util.h"
#include "ops/rope.h"
#include "support/test_support.h"

namespace ltx::rope_test {
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

// The vector path (aligned, unit-stride x and tables, table width a multiple of 8) against the
// general one-thread-per-pair path on the same values in a strided copy, bit for bit: the
// transformer's layout (x [B, T, H * D] viewed as [B, H, T, D], tables [B, H, T, D / 2]), f32
// and bf16 x and tables, table widths of 8, 24, 64, 2048, 4096 and ones that must fall back.
TEST(CudaRope, VectorPathIsBitIdenticalToGeneralPath) {
  LTX_REQUIRE_CUDA();
  uint64_t seed = 100;
  const int64_t b = 2, h = 3, t = 5;
  for (RopeLayout layout : {RopeLayout::Split, RopeLayout::Interleaved}) {
    const bool split = layout == RopeLayout::Split;
    for (DType dt : {DType::F32, DType::BF16}) {
      for (DType tdt : {dt, DType::F32}) {
        for (int64_t w : {8, 24, 64, 2048, 4096, 6, 12, 20}) {
          const bool vec = w % 8 == 0;
          const int64_t d = split ? 2 * w : w;
          SCOPED_TRACE(std::string(split ? "split" : "interleaved") + " x " + dtype_name(dt) +
                       " tables " + dtype_name(tdt) + " width " + std::to_string(w));
          const Tensor stored = test::random_tensor({b, t, h * d}, seed++).to(kGpu, dt);
          const Tensor x = stored.view({b, t, h, d}).transpose(1, 2);  // [B, H, T, D]
          const Tensor xs = test::non_contiguous_copy(x);
          for (const Shape& cs : {Shape{b, h, t, w}, Shape{b, 1, t, w}, Shape{t, w}}) {
            const Tensor c = test::random_tensor(cs, seed++).to(kGpu, tdt);
            const Tensor s = test::random_tensor(cs, seed++).to(kGpu, tdt);
            const Shape target{b, h, t, w};
            EXPECT_EQ(cuda::rope_vectorised(x, c.expand(target), s.expand(target), layout), vec)
                << cs.str();
            EXPECT_FALSE(cuda::rope_vectorised(xs, c.expand(target), s.expand(target), layout));
            const Tensor got = ops::apply_rope(x, c, s, layout);
            EXPECT_EQ(got.dtype(), dt);
            EXPECT_TRUE(same_bytes(got, ops::apply_rope(xs, c, s, layout))) << cs.str();
            // A strided table alone also takes the general path.
            const Tensor cn = test::non_contiguous_copy(c);
            EXPECT_FALSE(cuda::rope_vectorised(x, cn.expand(target), s.expand(target), layout));
            EXPECT_TRUE(same_bytes(got, ops::apply_rope(x, cn, s, layout))) << cs.str();
          }
        }
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
}  // namespace ltx::rope_test
