// The tiny LTX-2.3 transformer under the reference's nvfp4-cast policy: which Linears are
// quantised, how far its outputs move from the bf16 weights' (the quality gate), and LoRA fusion
// onto NVFP4 weights (the reference's nvfp4 rule).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/transformer/model.h"
#include "ops/nvfp4.h"
#include "parity/parity.h"
#include "quantization/nvfp4.h"
#include "support/test_support.h"
#include "models/tiny_ltx23.h"

namespace ltx::transformer_nvfp4_test {
namespace {

namespace tf = models::transformer;
using quantization::Mode;

using test::tiny_ltx23::forward;
io::WeightMap bf16_weights() { return test::tiny_ltx23::weights(); }
tf::LTXModelConfig tiny_config() { return test::tiny_ltx23::config(); }

TEST(TransformerNvfp4Cast, QuantisesExactlyTheReferencesTwelveLinearsABlock) {
  // The quantised weights are the ones taken as bf16 (the dtype the quantiser reads).
  std::map<std::string, DType> asked;
  io::WeightMap w = io::WeightMap::synthetic(
      [&](const std::string& name, const Shape& shape, DType dtype, Device device) {
        asked[name] = dtype;
        return test::random_tensor(shape, asked.size()).to(dtype).to(device);
      });
  (void)tf::LTXModel::load(w, tiny_config(), {DType::F32, Device::cpu(), Mode::Nvfp4Cast});
  int quantised = 0;
  for (const auto& [name, dtype] : asked) {
    const bool weight = name.ends_with(".weight");
    const std::string module = weight ? name.substr(0, name.size() - 7) : name;
    EXPECT_EQ(dtype == DType::BF16, weight && quantization::is_nvfp4_cast_linear(module)) << name;
    if (dtype == DType::BF16) ++quantised;
  }
  EXPECT_EQ(quantised, tiny_config().num_layers * 12);
}

TEST(TransformerNvfp4Cast, TinyTransformerOutputStaysWithinTheNvfp4QualityGate) {
  io::WeightMap wd = bf16_weights(), wq = bf16_weights();
  const tf::LTXModel dense = tf::LTXModel::load(wd, tiny_config());
  const tf::LTXModel nvfp4 =
      tf::LTXModel::load(wq, tiny_config(), {DType::F32, Device::cpu(), Mode::Nvfp4Cast});
  wq.finish("transformer");
  const tf::ModelOutputs a = forward(dense), b = forward(nvfp4);
  const parity::ErrorStats video = parity::compare(b.video, a.video);
  const parity::ErrorStats audio = parity::compare(b.audio, a.audio);
  std::printf("nvfp4-cast vs bf16 weights, tiny ltx23: video rel_l2 %.4e, audio rel_l2 %.4e\n",
              video.rel_l2, audio.rel_l2);
  // E2M1 keeps one mantissa bit on 8 levels a sign, scaled per 16 weights: the rms relative error
  // of a uniform-like weight is about 10%, so each quantised Linear's output moves by about that;
  // the residual stream carries the unquantised input past every block, and the audio stream is
  // only reached through the two cross-modal Linears the policy quantises, so it moves less.
  // The bounds leave about twice the error seen on this fixture; a wrong nibble order, scale
  // layout or layer moves the outputs by O(1).
  EXPECT_LT(video.rel_l2, 0.12);
  EXPECT_LT(audio.rel_l2, 0.05);
  EXPECT_GT(video.rel_l2, 0.0);  // the weights really were rounded
}

// The bits of an NVFP4 weight's three tensors (max |a - b| over each; u8 and e4m3 compare by value).
double nvfp4_diff(const ops::Nvfp4Weight& a, const ops::Nvfp4Weight& b) {
  return test::max_abs_diff(a.packed.to(DType::F32), b.packed.to(DType::F32)) +
         test::max_abs_diff(a.block_scales, b.block_scales) +
         test::max_abs_diff(a.tensor_scale.reshape({}), b.tensor_scale.reshape({}));
}

TEST(TransformerNvfp4Cast, LoraFusesAsTheReferencesNvfp4RuleAndResetsBitForBit) {
  test::TempDir dir;
  const std::string q = "transformer_blocks.0.attn1.to_q", proj = "patchify_proj";
  const std::string path = dir.file("lora.safetensors");
  io::write_safetensors(
      path, {{"diffusion_model." + q + ".lora_A.weight", test::random_tensor({2, 64}, 1).to(DType::BF16)},
             {"diffusion_model." + q + ".lora_B.weight", test::random_tensor({64, 2}, 2).to(DType::BF16)},
             {"diffusion_model." + proj + ".lora_A.weight", test::random_tensor({2, 24}, 3).to(DType::BF16)},
             {"diffusion_model." + proj + ".lora_B.weight", test::random_tensor({64, 2}, 4).to(DType::BF16)}});
  const lora::LoraSet set = {{lora::LoraFile::open(path), 0.7}};
  const nn::LoadOptions opt{DType::F32, Device::cpu(), Mode::Nvfp4Cast};
  ASSERT_TRUE(quantization::is_nvfp4_cast_linear(q));
  ASSERT_FALSE(quantization::is_nvfp4_cast_linear(proj));

  const tf::ModelOutputs plain = [&] {
    io::WeightMap w = bf16_weights();
    return forward(tf::LTXModel::load(w, tiny_config(), opt));
  }();
  io::WeightMap w = bf16_weights();
  const ops::Nvfp4Weight base = ops::quantize_nvfp4(w.take_any_shape(q + ".weight", DType::BF16));
  lora::Fuser fuser(w, {set}, opt);
  const tf::LTXModel model = tf::LTXModel::load(w, tiny_config(), opt);
  w.finish("transformer");
  const auto bound = [&] {
    return ops::Nvfp4Weight{fuser.bound(q + ".weight"), fuser.bound(q + ".weight_scale"),
                            fuser.bound(q + ".weight_scale_2")};
  };
  ASSERT_EQ(fuser.bound(q + ".weight").dtype(), DType::U8);
  EXPECT_EQ(fuser.bound(proj + ".weight").dtype(), DType::F32);  // outside the policy: dense
  EXPECT_EQ(nvfp4_diff(bound(), base), 0.0);
  // The fuser's buffers are what the model binds: the same outputs as without a fuser.
  EXPECT_EQ(test::max_abs_diff(forward(model).video, plain.video), 0.0);

  fuser.apply(set);
  // The reference's rule: dequantise to bf16, add the delta in bf16 (the bf16 rule on the
  // dequantised weight), quantise again.
  const ops::Nvfp4Weight expected = ops::quantize_nvfp4(lora::fused_weight(
      ops::dequantize_nvfp4(base, DType::BF16), lora::products_for(set, q + ".weight")));
  EXPECT_EQ(nvfp4_diff(bound(), expected), 0.0);
  EXPECT_GT(nvfp4_diff(bound(), base), 0.0);
  EXPECT_GT(test::max_abs_diff(forward(model).video, plain.video), 0.0);

  fuser.reset();
  EXPECT_EQ(nvfp4_diff(bound(), base), 0.0);
  EXPECT_EQ(test::max_abs_diff(forward(model).video, plain.video), 0.0);
}

}  // namespace
}  // namespace ltx::transformer_nvfp4_test
