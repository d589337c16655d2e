// The tiny LTX-2.3 transformer under --quantization fp8-blockwise (the reference's blockwise FP8
// policy): which Linears are stored in tiles, the quality gate against the bf16 weights, a
// blockwise file loaded as stored, and the reference's LoRA rule with the reset to the base.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "models/lora/fuse.h"
#include "models/lora/lora.h"
#include "models/transformer/model.h"
#include "ops/quantized_linear.h"
#include "parity/parity.h"
#include "quantization/file_format.h"
#include "quantization/fp8_blockwise.h"
#include "support/test_support.h"
#include "models/tiny_ltx23.h"

namespace ltx::transformer_fp8_blockwise_test {
namespace {

namespace tf = models::transformer;
using quantization::Mode;
using test::tiny_ltx23::forward;
using test::tiny_ltx23::kBf16Weights;

io::WeightMap weights_of(const std::string& path) { return test::tiny_ltx23::weights(path); }
tf::LTXModelConfig tiny_config() { return test::tiny_ltx23::config(); }

std::pair<double, double> rel_l2_vs_dense(const tf::ModelOutputs& q) {
  io::WeightMap w = weights_of(test::fixture(kBf16Weights));
  const tf::ModelOutputs d = forward(tf::LTXModel::load(w, tiny_config()));
  const double v = parity::compare(q.video, d.video).rel_l2;
  const double a = parity::compare(q.audio, d.audio).rel_l2;
  std::printf("fp8-blockwise vs bf16 weights, tiny ltx23: video rel_l2 %.4e, audio rel_l2 %.4e\n", v, a);
  return {v, a};
}

// The bf16 fixture with the policy's Linears stored as a blockwise FP8 checkpoint stores them.
std::string write_blockwise(const test::TempDir& dir) {
  const io::SafetensorsFile src(test::fixture(kBf16Weights));
  std::vector<std::pair<std::string, Tensor>> out;
  for (const std::string& name : src.names()) {
    const Tensor t = src.tensor(name);
    const std::string stem = name.substr(0, name.size() - std::string(".weight").size());
    if (!name.ends_with(".weight") || t.dim() != 2 || !quantization::is_fp8_blockwise_linear(stem)) {
      out.emplace_back(name, t);
      continue;
    }
    const ops::Fp8Blockwise q = ops::quantize_fp8_blockwise(t);
    out.emplace_back(name, q.weight);
    out.emplace_back(stem + ".weight_scale", q.weight_scale);
  }
  const std::string path = dir.file("fp8_blockwise.safetensors");
  io::write_safetensors(path, out, src.metadata());
  return path;
}

TEST(TransformerFp8Blockwise, QuantisesEveryBlockLinearButTheGateLogits) {
  // Over the checkpoint's 2-D weights: the attention projections and feed-forwards of every
  // block (video, audio and cross-modal) are tiled; the gate logits and everything outside the
  // blocks are not.
  const io::SafetensorsFile file(test::fixture(kBf16Weights));
  int tiled = 0, gates = 0;
  for (const std::string& name : file.names()) {
    if (!name.ends_with(".weight") || file.info(name).shape.size() != 2) continue;
    const std::string stem = name.substr(0, name.size() - std::string(".weight").size());
    const bool chosen = quantization::is_fp8_blockwise_linear(stem);
    const bool in_blocks = name.find("transformer_blocks.") != std::string::npos;
    const bool gate = name.find("to_gate_logits") != std::string::npos;
    EXPECT_EQ(chosen, in_blocks && !gate) << name;
    tiled += chosen;
    gates += gate;
  }
  const int64_t blocks = tiny_config().num_layers;
  EXPECT_EQ(tiled, blocks * (6 * 4 + 2 * 2));
  EXPECT_EQ(gates, blocks * 6);
}

TEST(TransformerFp8Blockwise, TinyTransformerOutputStaysWithinTheQualityGate) {
  io::WeightMap w = weights_of(test::fixture(kBf16Weights));
  const tf::LTXModel model =
      tf::LTXModel::load(w, tiny_config(), {DType::F32, Device::cpu(), Mode::Fp8Blockwise});
  w.finish("transformer");
  const auto [video, audio] = rel_l2_vs_dense(forward(model));
  // Two e4m3 operands per product, each on its tile's / group's own scale (so never worse than
  // one scale per tensor or per token): a few percent, as fp8 and fp8-scaled-mm
  // (transformer_fp8_scaled_test.cpp). A missing or transposed scale moves it by O(1).
  EXPECT_LT(video, 8e-2);
  EXPECT_LT(audio, 8e-2);
  EXPECT_GT(video, 0.0);
}

TEST(TransformerFp8Blockwise, ABlockwiseFileLoadsAsStoredAndGivesTheSameOutputs) {
  test::TempDir dir;
  const std::string path = write_blockwise(dir);
  const io::SafetensorsFile file(path);
  EXPECT_EQ(quantization::inspect_file(file).format, quantization::FileFormat::Fp8Blockwise);
  EXPECT_NO_THROW(quantization::check_mode_fits(file, Mode::Fp8Blockwise));
  EXPECT_ERROR_HAS(quantization::check_mode_fits(file, Mode::Fp8Cast),
                   "use --quantization fp8-blockwise");
  const nn::LoadOptions opt{DType::F32, Device::cpu(), Mode::Fp8Blockwise};
  io::WeightMap wf = weights_of(path), wd = weights_of(test::fixture(kBf16Weights));
  const tf::LTXModel from_file = tf::LTXModel::load(wf, tiny_config(), opt);
  wf.finish("transformer");  // every scale taken
  const tf::LTXModel from_dense = tf::LTXModel::load(wd, tiny_config(), opt);
  const tf::ModelOutputs a = forward(from_file), b = forward(from_dense);
  EXPECT_EQ(test::max_abs_diff(a.video, b.video), 0.0);
  EXPECT_EQ(test::max_abs_diff(a.audio, b.audio), 0.0);
}

TEST(TransformerFp8Blockwise, LoraFusesAsTheReferencesRuleAndResetsBitForBit) {
  test::TempDir dir;
  const std::string q = "transformer_blocks.0.attn1.to_q";
  const std::string lora_path = dir.file("lora.safetensors");
  io::write_safetensors(
      lora_path,
      {{"diffusion_model." + q + ".lora_A.weight", test::random_tensor({2, 64}, 1).to(DType::BF16)},
       {"diffusion_model." + q + ".lora_B.weight", test::random_tensor({64, 2}, 2).to(DType::BF16)}});
  const lora::LoraSet set = {{lora::LoraFile::open(lora_path), 0.7}};
  const nn::LoadOptions opt{DType::F32, Device::cpu(), Mode::Fp8Blockwise};
  io::WeightMap w = weights_of(test::fixture(kBf16Weights));
  lora::Fuser fuser(w, {set}, opt);
  const tf::LTXModel model = tf::LTXModel::load(w, tiny_config(), opt);
  w.finish("transformer");
  io::WeightMap src = weights_of(test::fixture(kBf16Weights));
  const ops::Fp8Blockwise base =
      ops::quantize_fp8_blockwise(src.take_any_shape(q + ".weight", DType::F32));
  const Tensor& weight = fuser.bound(q + ".weight");
  const Tensor& scale = fuser.bound(q + ".weight_scale");
  ASSERT_EQ(weight.dtype(), DType::F8E4M3FN);
  ASSERT_EQ(scale.shape(), Shape({1, 1}));
  EXPECT_EQ(test::max_abs_diff(weight.to(DType::F32), base.weight.to(DType::F32)), 0.0);
  EXPECT_EQ(test::max_abs_diff(scale, base.weight_scale), 0.0);
  const tf::ModelOutputs before = forward(model);

  fuser.apply(set);
  const Tensor delta = lora::fused_weight(Tensor::zeros(base.weight.shape(), DType::BF16),
                                          lora::products_for(set, q + ".weight"));
  const ops::Fp8Blockwise want = ops::fuse_delta_fp8_blockwise(base.weight, base.weight_scale, delta);
  EXPECT_EQ(test::max_abs_diff(weight.to(DType::F32), want.weight.to(DType::F32)), 0.0);
  EXPECT_EQ(test::max_abs_diff(scale, want.weight_scale), 0.0);
  EXPECT_GT(test::max_abs_diff(forward(model).video, before.video), 0.0);

  fuser.reset();
  EXPECT_EQ(test::max_abs_diff(weight.to(DType::F32), base.weight.to(DType::F32)), 0.0);
  EXPECT_EQ(test::max_abs_diff(scale, base.weight_scale), 0.0);
  EXPECT_EQ(test::max_abs_diff(forward(model).video, before.video), 0.0);
}

}  // namespace
}  // namespace ltx::transformer_fp8_blockwise_test
