// lora::fused_weight_on a GPU (the Fuser of a transformer loaded there, `ltx generate --device
// cuda`) against the CPU's fused_weight: the same bf16 roundings step by step and the factor
// products summed in the same order (ops::matmul_in_order), so the same bits.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "models/lora/fuse.h"
#include "support/test_support.h"

namespace ltx {
namespace {

lora::LoraFile::Pair pair(int64_t out, int64_t in, int64_t rank, uint64_t seed) {
  return {test::random_tensor({rank, in}, seed, -0.5f, 0.5f).to(DType::BF16),
          test::random_tensor({out, rank}, seed + 1, -0.5f, 0.5f).to(DType::BF16)};
}

TEST(LoraFuseOnCuda, RankOneIsBitForBitTheCpuFusion) {
  LTX_REQUIRE_CUDA();
  // One product per element: no summation order to differ in.
  const Tensor w = test::random_tensor({33, 65}, 1).to(DType::BF16);
  const lora::LoraFile::Pair p = pair(33, 65, 1, 2);
  const std::vector<lora::Product> products = {{&p, 0.7}};
  const Tensor gpu = lora::fused_weight_on(w, products, test::kGpu);
  EXPECT_TRUE(gpu.device().is_cuda());
  EXPECT_EQ(gpu.dtype(), DType::BF16);
  EXPECT_TRUE(test::same_bytes(gpu, lora::fused_weight(w, products)));
}

TEST(LoraFuseOnCuda, SeveralLorasAreBitForBitTheCpuFusion) {
  LTX_REQUIRE_CUDA();
  // Ranks past one K step of the in-order product, a zero strength (it still rounds), a negative
  // one: every factor sum and rounding as on the CPU.
  const Tensor w = test::random_tensor({47, 129}, 3).to(DType::BF16);
  const lora::LoraFile::Pair p1 = pair(47, 129, 7, 4), p2 = pair(47, 129, 40, 6);
  const std::vector<lora::Product> products = {{&p1, 1.0}, {&p2, -0.35}, {&p1, 0.0}};
  EXPECT_TRUE(test::same_bytes(lora::fused_weight_on(w, products, test::kGpu),
                               lora::fused_weight(w, products)));
  // An f32 weight keeps its dtype, with the bf16 values of the rule.
  const Tensor w32 = test::random_tensor({47, 129}, 5);
  EXPECT_TRUE(test::same_bytes(lora::fused_weight_on(w32, products, test::kGpu),
                               lora::fused_weight(w32, products)));
  // No products: the weight itself, on the device.
  EXPECT_TRUE(test::same_bytes(lora::fused_weight_on(w, {}, test::kGpu), w));
}

}  // namespace
}  // namespace ltx
