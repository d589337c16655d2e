// A llama.cpp Gemma 3 GGUF text encoder on the GPU (models/text/gemma/model.h): K-quant
// projections and a block-quantized embedding table (its looked-up rows gathered and dequantised
// on the device, lm_head on the blocks) against the CPU.
#include "support/gemma_gguf.h"

#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "io/io_test_util.h"
#include "models/text/gemma/model.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using text::GemmaAssets;
using text::GemmaTextModel;

TEST(CudaGemmaGguf, KQuantTextEncoderMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  test::TempDir dir;
  const std::string gguf = dir.file("wide-Q4_K.gguf");
  test::write_wide_gemma3_gguf(gguf, GgmlType::Q4_K, GgmlType::Q6_K);
  const GemmaAssets assets = GemmaAssets::load(gguf);
  const GemmaTextModel cpu = GemmaTextModel::load(assets);
  const GemmaTextModel gpu = GemmaTextModel::load(assets, {DType::F32, test::kGpu});
  const auto [ids, mask] = test::wide_gemma3_inputs();
  const std::vector<Tensor> hc = cpu.encode(ids, mask), hg = gpu.encode(ids, mask);
  ASSERT_EQ(hc.size(), hg.size());
  EXPECT_TRUE(hg.front().device().is_cuda());
  for (size_t l = 0; l < hc.size(); ++l) EXPECT_LE(test::rel_l2(hg[l], hc[l]), 1e-5) << l;
  EXPECT_LE(test::rel_l2(gpu.logits(hg.back()), cpu.logits(hc.back())), 1e-5);

  // bf16 on the GPU: within bf16 rounding.
  const GemmaTextModel bf16 = GemmaTextModel::load(assets, {DType::BF16, test::kGpu});
  const std::vector<Tensor> hb = bf16.encode(ids, mask);
  EXPECT_EQ(hb.back().dtype(), DType::BF16);
  EXPECT_LE(test::rel_l2(hb.back(), hc.back()), 3e-2);
}

}  // namespace
}  // namespace ltx
