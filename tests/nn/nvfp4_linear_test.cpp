// nn::Linear in the NVFP4 format: the reference's nvfp4-cast layer choice, the quantisation at
// load, a pre-quantised file written here loading to the quantiser's own tensors, and the
// one-line errors for files that do not fit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "nn/linear.h"
#include "ops/linalg.h"
#include "ops/nvfp4.h"
#include "quantization/file_format.h"
#include "quantization/mode.h"
#include "quantization/nvfp4.h"
#include "support/test_support.h"

namespace ltx::nvfp4_linear_test {
namespace {

using quantization::Mode;

nn::Linear load_scoped(io::WeightMap& w, const std::string& module, int64_t in, int64_t out,
                       Mode mode, bool has_bias = true) {
  const size_t dot = module.rfind('.', module.size() - 3);
  const std::string scope = module.substr(0, dot + 1), name = module.substr(dot + 1);
  io::WeightMap s = w.scoped(scope);
  return nn::Linear::load(s, name, in, out, has_bias, {DType::F32, Device::cpu(), mode});
}

Tensor weights_bf16(const Shape& shape, uint64_t seed) {
  return test::random_tensor(shape, seed, -0.3f, 0.3f).to(DType::BF16);
}

TEST(Nvfp4CastPolicy, ChoosesTheReferencesTwelveVideoLinears) {
  const std::vector<std::pair<std::string, bool>> cases = {
      {"transformer_blocks.0.attn1.to_q", true},
      {"transformer_blocks.0.attn1.to_k", true},
      {"transformer_blocks.0.attn1.to_v", true},
      {"transformer_blocks.0.attn1.to_out.0", true},
      {"transformer_blocks.12.attn2.to_q", true},
      {"transformer_blocks.0.attn2.to_out.0", true},
      {"transformer_blocks.1.audio_to_video_attn.to_q", true},
      {"transformer_blocks.1.audio_to_video_attn.to_out.0", true},
      {"transformer_blocks.1.video_to_audio_attn.to_k", true},
      {"transformer_blocks.1.video_to_audio_attn.to_v", true},
      {"transformer_blocks.0.ff.net.0.proj", true},
      {"transformer_blocks.0.ff.net.2", true},
      {"transformer_blocks.0._orig_mod.ff.net.2", true},
      // Left dense: the rest of the cross-modal attentions, the audio branch, the gate, others.
      {"transformer_blocks.0.attn2.to_k", false},
      {"transformer_blocks.0.attn2.to_v", false},
      {"transformer_blocks.1.audio_to_video_attn.to_k", false},
      {"transformer_blocks.1.video_to_audio_attn.to_q", false},
      {"transformer_blocks.1.video_to_audio_attn.to_out.0", false},
      {"transformer_blocks.1.audio_attn1.to_q", false},
      {"transformer_blocks.3.audio_ff.net.0.proj", false},
      {"transformer_blocks.0.attn1.to_gate_logits", false},
      {"transformer_blocks.x.attn1.to_q", false},
      {"adaln_single.linear", false},
      {"proj_out", false},
      {"video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q", false},
  };
  for (const auto& [name, selected] : cases)
    EXPECT_EQ(quantization::is_nvfp4_cast_linear(name), selected) << name;
}

TEST(Nvfp4CastLinear, QuantisesTheBf16WeightAtLoadAndMultipliesItsDequantisedForm) {
  const std::string module = "transformer_blocks.0.ff.net.0.proj";
  const int64_t in = 64, out = 40;
  io::WeightMap w;
  const Tensor weight = weights_bf16({out, in}, 1), bias = weights_bf16({out}, 2);
  w.add(module + ".weight", weight);
  w.add(module + ".bias", bias);
  const nn::Linear l = load_scoped(w, module, in, out, Mode::Nvfp4Cast);
  ASSERT_EQ(l.format, nn::LinearFormat::Nvfp4);
  EXPECT_EQ(l.in_features(), in);
  EXPECT_EQ(l.out_features(), out);
  EXPECT_EQ(l.bias.dtype(), DType::F32);
  const ops::Nvfp4Weight q = ops::quantize_nvfp4(weight);
  EXPECT_EQ(test::max_abs_diff(l.weight, q.packed), 0.0);
  EXPECT_EQ(test::max_abs_diff(l.block_scales.to(DType::F32), q.block_scales.to(DType::F32)), 0.0);
  EXPECT_EQ(l.tensor_scale.item(), q.tensor_scale.item());
  const Tensor dense = ops::dequantize_nvfp4(q, DType::F32);
  EXPECT_EQ(test::max_abs_diff(l.dense_weight(DType::F32), dense), 0.0);
  const Tensor x = test::random_tensor({2, 3, in}, 3);
  EXPECT_EQ(test::max_abs_diff(l(x), ops::linear(x, dense, bias.to(DType::F32))), 0.0);
  EXPECT_EQ(test::max_abs_diff(l.gelu_tanh(x), ops::linear_gelu_tanh(x, dense, bias.to(DType::F32))), 0.0);
  std::vector<std::string> roles;
  l.for_each_parameter([&](const char* role, const Tensor&) { roles.push_back(role); });
  EXPECT_EQ(roles, (std::vector<std::string>{"weight", "bias", "weight_scale", "weight_scale_2"}));
}

TEST(Nvfp4CastLinear, LeavesOtherLinearsDenseAndRefusesKNotAMultipleOf16) {
  {
    const std::string module = "transformer_blocks.0.audio_attn1.to_q";
    io::WeightMap w;
    w.add(module + ".weight", weights_bf16({16, 32}, 1));
    w.add(module + ".bias", weights_bf16({16}, 2));
    EXPECT_EQ(load_scoped(w, module, 32, 16, Mode::Nvfp4Cast).format, nn::LinearFormat::Dense);
  }
  const std::string module = "transformer_blocks.0.attn1.to_q";
  io::WeightMap w;
  w.add(module + ".weight", weights_bf16({16, 24}, 1));
  w.add(module + ".bias", weights_bf16({16}, 2));
  const std::string msg = test::error_of([&] { load_scoped(w, module, 24, 16, Mode::Nvfp4Cast); });
  EXPECT_NE(msg.find("--quantization nvfp4-cast: layer transformer_blocks.0.attn1.to_q has 24 "
                     "input features, not a multiple of 16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("use --quantization none or fp8-cast"), std::string::npos) << msg;
}

// A pre-quantised file in the reference's layout, made from the quantiser's output.
struct PrequantFile {
  test::TempDir dir;
  const std::string p = "transformer_blocks.0.attn1.to_q.";
  const int64_t in = 48, out = 20;
  Tensor weight = weights_bf16({out, in}, 5);
  ops::Nvfp4Weight q = ops::quantize_nvfp4(weight);
  Tensor bias = weights_bf16({out}, 6);

  std::string write(std::vector<std::pair<std::string, Tensor>> extra, bool with_all = true) {
    std::vector<std::pair<std::string, Tensor>> t = {{p + "bias", bias},
                                                     {"proj_out.weight", weights_bf16({4, 4}, 1)}};
    if (with_all) {
      t.emplace_back(p + "weight", q.packed);
      t.emplace_back(p + "weight_scale", q.block_scales);
      t.emplace_back(p + "weight_scale_2", q.tensor_scale);
      t.emplace_back(p + "input_scale", Tensor::full({}, 0.25, DType::F32));
    }
    for (auto& e : extra) t.push_back(std::move(e));
    const std::string path = dir.file("nvfp4.safetensors");
    io::write_safetensors(path, t);
    return path;
  }
};

TEST(Nvfp4PrequantLinear, LoadsThePackedTensorsAsStoredAndKeepsInputScale) {
  PrequantFile f;
  const std::string path = f.write({});
  const auto file = std::make_shared<io::SafetensorsFile>(path);
  EXPECT_EQ(quantization::inspect_file(*file).format, quantization::FileFormat::Nvfp4);
  EXPECT_NO_THROW(quantization::check_mode_fits(*file, Mode::Nvfp4Prequant));
  io::WeightMap w({file});
  const nn::Linear l = load_scoped(w, "transformer_blocks.0.attn1.to_q", f.in, f.out, Mode::Nvfp4Prequant);
  ASSERT_EQ(l.format, nn::LinearFormat::Nvfp4);
  EXPECT_EQ(l.in_features(), f.in);
  EXPECT_EQ(test::max_abs_diff(l.dense_weight(DType::F32), ops::dequantize_nvfp4(f.q, DType::F32)), 0.0);
  EXPECT_EQ(l.input_scale.item(), 0.25);
  EXPECT_FALSE(l.weight_scale.defined());  // fp8's scalar; NVFP4's scales are its own members
  // Each tensor once (block streaming moves exactly these), named as the file names them.
  std::vector<std::string> roles;
  std::vector<const void*> seen;
  l.for_each_parameter([&](const char* role, const Tensor& t) {
    roles.push_back(role);
    seen.push_back(&t);
  });
  std::vector<std::string> want = {"weight"};
  if (l.bias.defined()) want.push_back("bias");
  for (const char* r : {"weight_scale", "weight_scale_2", "input_scale"}) want.push_back(r);
  EXPECT_EQ(roles, want);
  std::vector<const void*> members = {&l.weight};
  if (l.bias.defined()) members.push_back(&l.bias);
  for (const Tensor* t : {&l.block_scales, &l.tensor_scale, &l.input_scale}) members.push_back(t);
  EXPECT_EQ(seen, members);
  // The file's other Linears stay dense.
  io::WeightMap root = w;
  const nn::Linear proj = nn::Linear::load(root, "proj_out", 4, 4, false,
                                           {DType::F32, Device::cpu(), Mode::Nvfp4Prequant});
  EXPECT_EQ(proj.format, nn::LinearFormat::Dense);
  EXPECT_NO_THROW(w.finish("nvfp4 file"));
}

TEST(Nvfp4PrequantLinear, MissingOrMisshapedScalesAreOneLineNamingTheLayer) {
  const std::string layer = "transformer_blocks.0.attn1.to_q";
  const auto error_for = [&](PrequantFile& f, const std::string& path) {
    io::WeightMap w({std::make_shared<io::SafetensorsFile>(path)});
    return test::error_of([&] { load_scoped(w, layer, f.in, f.out, Mode::Nvfp4Prequant); });
  };
  {
    PrequantFile f;
    const std::string msg = error_for(f, f.write({{f.p + "weight", f.q.packed},
                                                  {f.p + "weight_scale", f.q.block_scales}},
                                                 false));
    EXPECT_NE(msg.find(layer + " has .weight_scale without .weight_scale_2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("nvfp4-prequant"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  {
    PrequantFile f;
    const std::string msg = error_for(
        f, f.write({{f.p + "weight", f.q.packed},
                    {f.p + "weight_scale", Tensor::zeros({20, 3}, DType::F8E4M3FN)},
                    {f.p + "weight_scale_2", f.q.tensor_scale}},
                   false));
    EXPECT_NE(msg.find(layer + ".weight_scale is f8_e4m3fn [20, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[128, 4]"), std::string::npos) << msg;
  }
  {
    PrequantFile f;
    const std::string msg = error_for(
        f, f.write({{f.p + "weight", f.weight},
                    {f.p + "weight_scale", f.q.block_scales},
                    {f.p + "weight_scale_2", f.q.tensor_scale}},
                   false));
    EXPECT_NE(msg.find(layer + ".weight is bf16 [20, 48]"), std::string::npos) << msg;
  }
}

TEST(Nvfp4PrequantLinear, Bf16FileUnderPrequantNamesTheFileAndTheModesThatFit) {
  test::TempDir dir;
  const std::string path = dir.file("dense.safetensors");
  io::write_safetensors(path, {{"transformer_blocks.0.attn1.to_q.weight", weights_bf16({16, 16}, 1)}});
  const std::string msg = test::error_of(
      [&] { quantization::check_mode_fits(io::SafetensorsFile(path), Mode::Nvfp4Prequant); });
  EXPECT_NE(msg.find(path + " is a dense"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--quantization nvfp4-prequant cannot load it, use --quantization none, "
                     "fp8-cast, fp8, nvfp4-cast"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

}  // namespace
}  // namespace ltx::nvfp4_linear_test
