// The tiny LTX-2.3 transformer under the FP8 GEMM modes: the reference's fp8-scaled-mm on a
// pre-quantised file made here (which layers it binds FP8, the file checks, the quality gate, its
// LoRA rule) and our fp8 (per-tensor weights quantised at load, per-token activations).
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
#include "quantization/fp8_cast.h"
#include "support/test_support.h"
#include "models/tiny_ltx23.h"

namespace ltx::transformer_fp8_scaled_test {
namespace {

namespace tf = models::transformer;
using quantization::Mode;

using test::tiny_ltx23::forward;
using test::tiny_ltx23::kBf16Weights;

// One static activation scale for every layer (amax 16 maps to 448): the tiny model's Linear
// inputs (normalised and modulated hidden states, attention outputs, GELU outputs) stay well
// inside it, so the static scale rounds them on e4m3's normal grid, as a calibrated checkpoint's
// scales do.
constexpr float kInputScale = 16.0f / 448.0f;

io::WeightMap weights_of(const std::string& path) { return test::tiny_ltx23::weights(path); }
tf::LTXModelConfig tiny_config() { return test::tiny_ltx23::config(); }

// The bf16 fixture with fp8-cast's Linear weights stored as the reference's pre-quantised files
// store them: e4m3 weight, per-tensor weight_scale, input_scale (unless `input_scales` is false);
// biases and the other layers stay bf16.
std::string write_prequantised(const test::TempDir& dir, bool input_scales = true) {
  const io::SafetensorsFile src(test::fixture(kBf16Weights));
  std::vector<std::pair<std::string, Tensor>> out;
  for (const std::string& name : src.names()) {
    const Tensor t = src.tensor(name);
    if (!name.ends_with(".weight") || !quantization::is_fp8_cast_parameter(name)) {
      out.emplace_back(name, t);
      continue;
    }
    const ops::Fp8PerTensor q = ops::quantize_fp8_per_tensor(t);
    const std::string stem = name.substr(0, name.size() - std::string(".weight").size());
    out.emplace_back(name, q.weight);
    out.emplace_back(stem + ".weight_scale", q.weight_scale);
    if (input_scales) out.emplace_back(stem + ".input_scale", Tensor::full({}, kInputScale, DType::F32));
  }
  const std::string path = dir.file(input_scales ? "fp8_scaled.safetensors" : "fp8_no_input.safetensors");
  io::write_safetensors(path, out, src.metadata());
  return path;
}

tf::ModelOutputs dense_outputs() {
  io::WeightMap w = weights_of(test::fixture(kBf16Weights));
  return forward(tf::LTXModel::load(w, tiny_config()));
}

std::pair<double, double> rel_l2_vs_dense(const tf::ModelOutputs& q, const char* what) {
  const tf::ModelOutputs d = dense_outputs();
  const double v = parity::compare(q.video, d.video).rel_l2;
  const double a = parity::compare(q.audio, d.audio).rel_l2;
  std::printf("%s vs bf16 weights, tiny ltx23: video rel_l2 %.4e, audio rel_l2 %.4e\n", what, v, a);
  return {v, a};
}

TEST(TransformerFp8ScaledMm, BindsTheFilesFp8LayersWithTheirScales) {
  test::TempDir dir;
  const std::string path = write_prequantised(dir);
  io::WeightMap w = weights_of(path);
  const tf::LTXModel model =
      tf::LTXModel::load(w, tiny_config(), {DType::F32, Device::cpu(), Mode::Fp8ScaledMm});
  w.finish("transformer");  // every scale was taken
  int fp8 = 0;
  const io::SafetensorsFile file(path);
  for (const std::string& name : file.names())
    if (name.ends_with(".weight_scale")) ++fp8;
  const int64_t blocks = tiny_config().num_layers;
  EXPECT_EQ(fp8, blocks * (6 * 4 + 2 * 2));
  EXPECT_EQ(quantization::inspect_file(file).format, quantization::FileFormat::Fp8PerTensor);
}

TEST(TransformerFp8ScaledMm, RefusesADenseFileAndALayerWithoutInputScale) {
  test::TempDir dir;
  const std::string dense = test::fixture(kBf16Weights);
  EXPECT_ERROR_HAS(quantization::check_mode_fits(io::SafetensorsFile(dense), Mode::Fp8ScaledMm),
                   dense + " has no F8_E4M3 '.weight' with a '.weight_scale'");
  EXPECT_ERROR_HAS(quantization::check_mode_fits(io::SafetensorsFile(dense), Mode::Fp8ScaledMm),
                   "use --quantization fp8-cast");
  const std::string no_input = write_prequantised(dir, false);
  EXPECT_ERROR_HAS(quantization::check_mode_fits(io::SafetensorsFile(no_input), Mode::Fp8ScaledMm),
                   "' has a weight_scale but no input_scale");
  EXPECT_ERROR_HAS(quantization::check_mode_fits(io::SafetensorsFile(no_input), Mode::Fp8ScaledMm),
                   "use --quantization fp8");
  // The same file loads under fp8, which computes its activation scales.
  EXPECT_NO_THROW(quantization::check_mode_fits(io::SafetensorsFile(no_input), Mode::Fp8));
  io::WeightMap w = weights_of(no_input);
  EXPECT_ERROR_HAS(tf::LTXModel::load(w, tiny_config(), {DType::F32, Device::cpu(), Mode::Fp8ScaledMm}),
                   "has a weight_scale but no input_scale");
}

TEST(TransformerFp8ScaledMm, TinyTransformerOutputStaysWithinTheQualityGate) {
  test::TempDir dir;
  io::WeightMap w = weights_of(write_prequantised(dir));
  const tf::LTXModel model =
      tf::LTXModel::load(w, tiny_config(), {DType::F32, Device::cpu(), Mode::Fp8ScaledMm});
  const auto [video, audio] = rel_l2_vs_dense(forward(model), "fp8-scaled-mm");
  // Weights and activations each round to e4m3 (about 2.4% rms relative error per operand, see
  // transformer_fp8_cast_test.cpp), so a Linear's output moves by about sqrt(2) * 2.4% = 3.4%;
  // the residual stream keeps the stack from compounding it. 8e-2 leaves room for that; a wrong
  // scale (a factor of input_scale or weight_scale missing) or a dropped bias moves it by O(1).
  EXPECT_LT(video, 8e-2);
  EXPECT_LT(audio, 8e-2);
  EXPECT_GT(video, 0.0);
}

TEST(TransformerFp8, TinyTransformerOutputStaysWithinTheQualityGate) {
  io::WeightMap w = weights_of(test::fixture(kBf16Weights));
  const tf::LTXModel model =
      tf::LTXModel::load(w, tiny_config(), {DType::F32, Device::cpu(), Mode::Fp8});
  w.finish("transformer");
  const auto [video, audio] = rel_l2_vs_dense(forward(model), "fp8 (per-token activations)");
  // As fp8-scaled-mm: two e4m3 operands per product. Per-token scales put every row's largest
  // value at 448, so no row is clamped or pushed into the subnormals: it is never worse than a
  // static scale on the same layers.
  EXPECT_LT(video, 8e-2);
  EXPECT_LT(audio, 8e-2);
  EXPECT_GT(video, 0.0);
}

// The LoRA file of transformer_fp8_cast_test.cpp: one FP8 layer and one dense one.
lora::LoraSet tiny_lora(const test::TempDir& dir, const std::string& q, const std::string& proj) {
  const std::string path = dir.file("lora.safetensors");
  io::write_safetensors(
      path, {{"diffusion_model." + q + ".lora_A.weight", test::random_tensor({2, 64}, 1).to(DType::BF16)},
             {"diffusion_model." + q + ".lora_B.weight", test::random_tensor({64, 2}, 2).to(DType::BF16)},
             {"diffusion_model." + proj + ".lora_A.weight", test::random_tensor({2, 24}, 3).to(DType::BF16)},
             {"diffusion_model." + proj + ".lora_B.weight", test::random_tensor({64, 2}, 4).to(DType::BF16)}});
  return {{lora::LoraFile::open(path), 0.7}};
}

// Fuses onto a model loaded from `path` with `mode` and checks the reference's fp8_scaled_mm rule
// on the FP8 layer, the bf16 rule on the dense one, and the reset to the base bit for bit.
void check_lora_requantises(const test::TempDir& dir, const std::string& path, Mode mode,
                            const ops::Fp8PerTensor& base) {
  const std::string q = "transformer_blocks.0.attn1.to_q", proj = "patchify_proj";
  const lora::LoraSet set = tiny_lora(dir, q, proj);
  const nn::LoadOptions opt{DType::F32, Device::cpu(), mode};
  io::WeightMap w = weights_of(path);
  lora::Fuser fuser(w, {set}, opt);
  const tf::LTXModel model = tf::LTXModel::load(w, tiny_config(), opt);
  w.finish("transformer");
  const Tensor& weight = fuser.bound(q + ".weight");
  const Tensor& scale = fuser.bound(q + ".weight_scale");
  ASSERT_EQ(weight.dtype(), DType::F8E4M3FN);
  EXPECT_EQ(test::max_abs_diff(weight.to(DType::F32), base.weight.to(DType::F32)), 0.0);
  EXPECT_EQ(scale.item(), base.weight_scale.item());
  EXPECT_EQ(fuser.bound(proj + ".weight").dtype(), DType::F32);  // outside the FP8 set: dense
  const tf::ModelOutputs before = forward(model);

  fuser.apply(set);
  const std::vector<lora::Product> products = lora::products_for(set, q + ".weight");
  // The delta as the reference aggregates it (bf16), here read off the bf16 rule on a zero weight.
  const Tensor delta = lora::fused_weight(Tensor::zeros(base.weight.shape(), DType::BF16), products);
  const ops::Fp8PerTensor want =
      ops::fuse_delta_fp8_per_tensor(base.weight, base.weight_scale, delta);
  EXPECT_EQ(test::max_abs_diff(weight.to(DType::F32), want.weight.to(DType::F32)), 0.0);
  EXPECT_EQ(scale.item(), want.weight_scale.item());
  EXPECT_NE(scale.item(), base.weight_scale.item());  // a fresh scale
  // The dense layer takes the bf16 rule.
  io::WeightMap src = weights_of(test::fixture(kBf16Weights));
  const Tensor proj_base = src.take_any_shape(proj + ".weight", DType::BF16);
  EXPECT_EQ(test::max_abs_diff(fuser.bound(proj + ".weight"),
                               lora::fused_weight(proj_base, lora::products_for(set, proj + ".weight"))
                                   .to(DType::F32)),
            0.0);
  EXPECT_GT(test::max_abs_diff(forward(model).video, before.video), 0.0);

  fuser.reset();
  EXPECT_EQ(test::max_abs_diff(weight.to(DType::F32), base.weight.to(DType::F32)), 0.0);
  EXPECT_EQ(scale.item(), base.weight_scale.item());
  EXPECT_EQ(test::max_abs_diff(forward(model).video, before.video), 0.0);
}

ops::Fp8PerTensor quantised_to_q() {
  io::WeightMap src = weights_of(test::fixture(kBf16Weights));
  return ops::quantize_fp8_per_tensor(
      src.take_any_shape("transformer_blocks.0.attn1.to_q.weight", DType::F32));
}

TEST(TransformerFp8ScaledMm, LoraRequantisesPerTensorAndRestoresTheBaseBitForBit) {
  test::TempDir dir;
  check_lora_requantises(dir, write_prequantised(dir), Mode::Fp8ScaledMm, quantised_to_q());
}

TEST(TransformerFp8, LoraRequantisesPerTensorAndRestoresTheBaseBitForBit) {
  test::TempDir dir;
  check_lora_requantises(dir, test::fixture(kBf16Weights), Mode::Fp8, quantised_to_q());
}

}  // namespace
}  // namespace ltx::transformer_fp8_scaled_test
