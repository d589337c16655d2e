// Image-aware prompt enhancement on a GPU against the CPU: the Gemma 3 vision tower and projector
// (f32 on both: the same math to f32 accumulation error; bf16 on the GPU, the pipelines'
// precision, within bf16 rounding), the prefill with image features and the bidirectional image
// block, and the whole enhance_i2v on the tiny Gemma 3 of text_gemma3_root.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "models/text/gemma/enhance.h"
#include "models/text/gemma/image_processor.h"
#include "models/text/gemma/model.h"
#include "models/text/gemma/vision.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using text::GemmaAssets;
using text::GemmaTextModel;
using text::GemmaVisionTower;

const GemmaAssets& assets() {
  static const GemmaAssets a = GemmaAssets::load(test::fixture("text_gemma3_root"));
  return a;
}

Tensor test_pixels() {
  Tensor px = Tensor::empty({1, 3, 56, 56});
  float* p = px.data<float>();
  for (int64_t i = 0; i < px.numel(); ++i) p[i] = std::sin(0.37f * static_cast<float>(i)) * 0.9f;
  return px;
}

Tensor test_image() {
  std::vector<uint8_t> px(36 * 48 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37) % 251);
  return Tensor::from_vector(px, {36, 48, 3});
}

TEST(CudaGemmaVision, F32TowerAndProjectorMatchTheCpu) {
  LTX_REQUIRE_CUDA();
  const GemmaVisionTower cpu = GemmaVisionTower::load(assets());
  const GemmaVisionTower gpu = GemmaVisionTower::load(assets(), {DType::F32, test::kGpu});
  const Tensor px = test_pixels();
  const Tensor vc = cpu.vision(px), vg = gpu.vision(px.to(test::kGpu));
  EXPECT_TRUE(vg.device().is_cuda());
  EXPECT_LE(test::rel_l2(vg, vc), 1e-5);
  EXPECT_LE(test::rel_l2(gpu.project(vg), cpu.project(vc)), 1e-5);
}

TEST(CudaGemmaVision, Bf16TowerMatchesTheCpuWithinBf16Rounding) {
  LTX_REQUIRE_CUDA();
  const GemmaVisionTower cpu = GemmaVisionTower::load(assets());
  const GemmaVisionTower gpu = GemmaVisionTower::load(assets(), {DType::BF16, test::kGpu});
  const Tensor px = test_pixels();
  const Tensor fc = cpu.encode(px), fg = gpu.encode(px.to(test::kGpu));
  EXPECT_EQ(fg.dtype(), DType::BF16);
  const double e = test::rel_l2(fg, fc);
  EXPECT_LE(e, 2e-2);
  EXPECT_GT(e, 1e-5) << "no bf16 rounding: did the GPU run in f32?";
}

// The prefill of an i2v prompt: the image rows of hidden state 0 are the features, and the last
// hidden state agrees with the CPU's (f32 on both).
TEST(CudaGemmaVision, PrefillWithImageFeaturesMatchesTheCpu) {
  LTX_REQUIRE_CUDA();
  const GemmaTextModel cpu_model = GemmaTextModel::load(assets());
  const GemmaTextModel gpu_model = GemmaTextModel::load(assets(), {DType::F32, test::kGpu});
  const GemmaVisionTower cpu_vision = GemmaVisionTower::load(assets());
  const text::PromptEnhancer enhancer(assets(), cpu_model);
  const Tensor features = cpu_vision.encode(test_pixels()).select(0, 0);
  const text::EnhanceResult r =
      enhancer.prepare_i2v("a fox", "Describe the video.", cpu_vision.config(), features.size(0));
  const auto T = static_cast<int64_t>(r.input_ids.size());
  std::vector<int64_t> pos(r.input_ids.size());
  int64_t valid = 0;
  for (size_t i = 0; i < pos.size(); ++i) {
    valid += r.attention_mask[i] != 0;
    pos[i] = std::max<int64_t>(valid - 1, 0);
  }
  auto prefill = [&](const GemmaTextModel& m, const Tensor& f, std::vector<Tensor>* hs) {
    text::GemmaKvCache cache = m.make_cache(1, T);
    const text::GemmaPrefillImages images{r.image_tokens, f};
    return m.forward(Tensor::from_vector(r.input_ids, {1, T}), Tensor::from_vector(pos, {1, T}),
                     Tensor::from_vector(r.attention_mask, {1, T}), cache, hs, nullptr, &images);
  };
  std::vector<Tensor> hs;
  const Tensor hg = prefill(gpu_model, features.to(test::kGpu), &hs);
  const Tensor hc = prefill(cpu_model, features, nullptr);
  EXPECT_TRUE(hg.device().is_cuda());
  const int64_t first = T - valid;  // compare the real tokens (left pads are fully masked rows)
  EXPECT_LE(test::rel_l2(hg.narrow(1, first, T - first), hc.narrow(1, first, T - first)), 1e-5);
  int64_t row = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (!r.image_tokens[static_cast<size_t>(t)]) continue;
    EXPECT_LE(test::rel_l2(hs[0].select(0, 0).select(0, t), features.select(0, row++)), 1e-7);
  }
  EXPECT_EQ(row, features.size(0));
}

// enhance_i2v with the model and the tower on the GPU in bf16 (the pipelines' placement): the
// host-side preprocessing is the CPU's bit for bit, the features within bf16 rounding, and the
// greedy decode runs to its token budget or an EOS.
TEST(CudaGemmaVision, EnhanceI2vRunsOnTheGpu) {
  LTX_REQUIRE_CUDA();
  const nn::LoadOptions gpu{DType::BF16, test::kGpu};
  const GemmaTextModel cpu_model = GemmaTextModel::load(assets());
  const GemmaTextModel gpu_model = GemmaTextModel::load(assets(), gpu);
  const GemmaVisionTower cpu_vision = GemmaVisionTower::load(assets());
  const GemmaVisionTower gpu_vision = GemmaVisionTower::load(assets(), gpu);
  text::EnhanceOptions o;
  o.system_prompt = "Describe the video.";
  o.greedy = true;
  o.max_new_tokens = 4;
  const text::EnhanceResult c =
      text::PromptEnhancer(assets(), cpu_model).enhance_i2v("a fox", test_image(), cpu_vision, o);
  const text::EnhanceResult g =
      text::PromptEnhancer(assets(), gpu_model).enhance_i2v("a fox", test_image(), gpu_vision, o);
  EXPECT_TRUE(test::same_bytes(g.pixel_values, c.pixel_values));
  EXPECT_EQ(g.input_ids, c.input_ids);
  EXPECT_LE(test::rel_l2(g.image_features, c.image_features), 2e-2);
  EXPECT_FALSE(g.generated_ids.empty());
  EXPECT_LE(g.generated_ids.size(), 4u);
}

}  // namespace
}  // namespace ltx
