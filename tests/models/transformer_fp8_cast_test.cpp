// The tiny LTX-2.3 transformer under the reference's fp8-cast policy: which parameters become
// e4m3, how far its outputs move from the bf16 weights' (the quality gate), and LoRA fusion onto
// e4m3 weights.
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
#include "quantization/fp8_cast.h"
#include "support/test_support.h"
#include "models/tiny_ltx23.h"

namespace ltx::transformer_fp8_cast_test {
namespace {

namespace tf = models::transformer;
using quantization::Mode;

using test::tiny_ltx23::forward;
io::WeightMap bf16_weights() { return test::tiny_ltx23::weights(); }
tf::LTXModelConfig tiny_config() { return test::tiny_ltx23::config(); }

TEST(TransformerFp8Cast, StoresExactlyTheReferencesLinearsInE4m3) {
  // Every parameter the model binds, with the dtype it asks for.
  std::map<std::string, DType> asked;
  io::WeightMap w = io::WeightMap::synthetic(
      [&](const std::string& name, const Shape& shape, DType dtype, Device device) {
        asked[name] = dtype;
        return Tensor::zeros(shape, dtype, device);
      });
  (void)tf::LTXModel::load(w, tiny_config(), {DType::F32, Device::cpu(), Mode::Fp8Cast});
  int e4m3 = 0;
  for (const auto& [name, dtype] : asked) {
    EXPECT_EQ(dtype == DType::F8E4M3FN, quantization::is_fp8_cast_parameter(name)) << name;
    if (dtype == DType::F8E4M3FN) ++e4m3;
  }
  // Per block: 6 attentions x (to_q, to_k, to_v, to_out.0) + 2 feed-forwards x 2 Linears, each
  // with weight and bias.
  const int64_t blocks = tiny_config().num_layers;
  EXPECT_EQ(e4m3, blocks * (6 * 4 + 2 * 2) * 2);
  EXPECT_EQ(asked.at("transformer_blocks.0.audio_ff.net.2.weight"), DType::F8E4M3FN);
  EXPECT_EQ(asked.at("transformer_blocks.0.video_to_audio_attn.to_out.0.bias"), DType::F8E4M3FN);
  EXPECT_EQ(asked.at("patchify_proj.weight"), DType::F32);
  for (const auto& [name, dtype] : asked) {
    if (name.find("to_gate_logits") != std::string::npos) {
      EXPECT_EQ(dtype, DType::F32) << name;
    }
  }
}

TEST(TransformerFp8Cast, TinyTransformerOutputStaysWithinTheE4m3QualityGate) {
  io::WeightMap wd = bf16_weights(), wq = bf16_weights();
  const tf::LTXModel dense = tf::LTXModel::load(wd, tiny_config());
  const tf::LTXModel fp8 =
      tf::LTXModel::load(wq, tiny_config(), {DType::F32, Device::cpu(), Mode::Fp8Cast});
  const tf::ModelOutputs a = forward(dense), b = forward(fp8);
  const parity::ErrorStats video = parity::compare(b.video, a.video);
  const parity::ErrorStats audio = parity::compare(b.audio, a.audio);
  std::printf("fp8-cast vs bf16 weights, tiny ltx23: video rel_l2 %.4e, audio rel_l2 %.4e\n",
              video.rel_l2, audio.rel_l2);
  // e4m3 keeps 3 mantissa bits: rounding to nearest leaves a uniform error of up to half a step
  // (2^-4 of the value's binade), an rms relative error of about 2^-3 / sqrt(12) / 1.5 = 2.4% per
  // weight, so about 2.4% rel L2 on each Linear's output when the errors are independent; the
  // residual stream carries the unquantized input past every block, so the stack does not
  // compound it much (measured on this fixture: 1.9e-2 video, 2.4e-2 audio). 5e-2 leaves room
  // for that; a wrong cast, layer or a missing bias moves the outputs by O(1).
  EXPECT_LT(video.rel_l2, 5e-2);
  EXPECT_LT(audio.rel_l2, 5e-2);
  EXPECT_GT(video.rel_l2, 0.0);  // the weights really were rounded
}

TEST(TransformerFp8Cast, LoraFusesOntoTheE4m3WeightsAndRestoresThemBitForBit) {
  test::TempDir dir;
  const std::string q = "transformer_blocks.0.attn1.to_q", proj = "patchify_proj";
  const std::string path = dir.file("lora.safetensors");
  io::write_safetensors(
      path, {{"diffusion_model." + q + ".lora_A.weight", test::random_tensor({2, 64}, 1).to(DType::BF16)},
             {"diffusion_model." + q + ".lora_B.weight", test::random_tensor({64, 2}, 2).to(DType::BF16)},
             {"diffusion_model." + proj + ".lora_A.weight", test::random_tensor({2, 24}, 3).to(DType::BF16)},
             {"diffusion_model." + proj + ".lora_B.weight", test::random_tensor({64, 2}, 4).to(DType::BF16)}});
  const lora::LoraSet set = {{lora::LoraFile::open(path), 0.7}};
  const nn::LoadOptions opt{DType::F32, Device::cpu(), Mode::Fp8Cast};

  io::WeightMap w = bf16_weights();
  const Tensor base_q = w.take_any_shape(q + ".weight", DType::BF16).to(DType::F8E4M3FN);
  lora::Fuser fuser(w, {set}, opt);
  const tf::LTXModel model = tf::LTXModel::load(w, tiny_config(), opt);
  w.finish("transformer");
  ASSERT_EQ(fuser.bound(q + ".weight").dtype(), DType::F8E4M3FN);
  EXPECT_EQ(fuser.bound(proj + ".weight").dtype(), DType::F32);  // outside the policy: dense
  EXPECT_EQ(test::max_abs_diff(fuser.bound(q + ".weight"), base_q), 0.0);
  const tf::ModelOutputs before = forward(model);

  fuser.apply(set);
  // The reference's rule: bf16(delta + dequant(W_e4m3)), cast back to e4m3.
  const Tensor expected = lora::fused_weight(base_q, lora::products_for(set, q + ".weight"));
  ASSERT_EQ(expected.dtype(), DType::F8E4M3FN);
  EXPECT_EQ(test::max_abs_diff(fuser.bound(q + ".weight"), expected), 0.0);
  EXPECT_GT(test::max_abs_diff(fuser.bound(q + ".weight"), base_q), 0.0);
  EXPECT_GT(test::max_abs_diff(forward(model).video, before.video), 0.0);

  fuser.reset();
  EXPECT_EQ(test::max_abs_diff(fuser.bound(q + ".weight"), base_q), 0.0);
  EXPECT_EQ(test::max_abs_diff(forward(model).video, before.video), 0.0);
}

}  // namespace
}  // namespace ltx::transformer_fp8_cast_test
