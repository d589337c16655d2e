// lora::fused_weight_on a GPU (the Fuser of a transformer loaded there, `ltx generate --device
// cuda`) against the CPU's fused_weight: the same bf16 roundings step by step; only the factor
// GEMMs may sum in another order, which can move a value by one bf16 step.
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

TEST(LoraFuseOnCuda, SeveralLorasAgreeWithTheCpuWithinOneBf16Step) {
  LTX_REQUIRE_CUDA();
  const Tensor w = test::random_tensor({47, 129}, 3).to(DType::BF16);
  const lora::LoraFile::Pair p1 = pair(47, 129, 7, 4), p2 = pair(47, 129, 16, 6);
  const std::vector<lora::Product> products = {{&p1, 1.0}, {&p2, -0.35}, {&p1, 0.0}};
  const std::vector<double> gpu = lora::fused_weight_on(w, products, test::kGpu).to_double_vector();
  const std::vector<double> cpu = lora::fused_weight(w, products).to_double_vector();
  ASSERT_EQ(gpu.size(), cpu.size());
  int64_t differ = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (gpu[i] == cpu[i]) continue;
    ++differ;
    // One bf16 step of the larger magnitude (8 significant bits), twice for the two roundings.
    EXPECT_LE(std::fabs(gpu[i] - cpu[i]), 2.0 * std::ldexp(std::max(std::fabs(gpu[i]), std::fabs(cpu[i])), -7))
        << "element " << i << ": gpu " << gpu[i] << ", cpu " << cpu[i];
  }
  EXPECT_LE(differ, static_cast<int64_t>(cpu.size()) / 20) << differ << " of " << cpu.size();
  // No products: the weight itself, on the device.
  EXPECT_TRUE(test::same_bytes(lora::fused_weight_on(w, {}, test::kGpu), w));
}

}  // namespace
}  // namespace ltx
