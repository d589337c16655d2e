// The tiny LTX-2.3 transformer under the reference's nvfp4-cast policy: which Linears are
// quantised, how far its outputs move from the bf16 weights' (the quality gate), and the refusal
// of LoRA fusion onto NVFP4 weights.
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

TEST(TransformerNvfp4Cast, RefusesToFuseALoraIntoNvfp4Weights) {
  test::TempDir dir;
  const std::string q = "transformer_blocks.0.attn1.to_q";
  const std::string path = dir.file("lora.safetensors");
  io::write_safetensors(
      path, {{"diffusion_model." + q + ".lora_A.weight", test::random_tensor({2, 64}, 1).to(DType::BF16)},
             {"diffusion_model." + q + ".lora_B.weight", test::random_tensor({64, 2}, 2).to(DType::BF16)}});
  const lora::LoraSet set = {{lora::LoraFile::open(path), 0.7}};
  io::WeightMap w = bf16_weights();
  EXPECT_ERROR_HAS(lora::Fuser(w, {set}, {DType::F32, Device::cpu(), Mode::Nvfp4Cast}),
                   "LoRA: fusing into NVFP4 weights is not supported (--quantization nvfp4-cast)");
}

}  // namespace
}  // namespace ltx::transformer_nvfp4_test
