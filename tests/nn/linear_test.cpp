// nn::Linear in its storage formats (dense, fp8-cast, fp8-scaled-mm, fp8) and the quantization policy it loads with:
// the reference's fp8-cast layer choice, cast, scale folding and the file-format checks.
#include "nn/linear.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/dtype_bits.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/quantized_linear.h"
#include "quantization/file_format.h"
#include "quantization/fp8_blockwise.h"
#include "quantization/fp8_cast.h"
#include "quantization/mode.h"
#include "support/test_support.h"

namespace ltx::linear_test {
namespace {

using quantization::Mode;

// Values in the range of real Linear weights (normal and subnormal e4m3 both taken).
Tensor weights_bf16(const Shape& shape, uint64_t seed) {
  return test::random_tensor(shape, seed, -0.3f, 0.3f).to(DType::BF16);
}

// A map holding one Linear, `module` (full name), in bf16 as checkpoints store it.
io::WeightMap one_linear(const std::string& module, int64_t in, int64_t out) {
  io::WeightMap w;
  w.add(module + ".weight", weights_bf16({out, in}, 1));
  w.add(module + ".bias", weights_bf16({out}, 2));
  return w;
}

nn::Linear load_scoped(io::WeightMap& w, const std::string& module, int64_t in, int64_t out,
                       Mode mode) {
  const size_t dot = module.rfind('.', module.size() - 3);  // "…attn1." + "to_q"
  const std::string scope = module.substr(0, dot + 1), name = module.substr(dot + 1);
  io::WeightMap s = w.scoped(scope);
  return nn::Linear::load(s, name, in, out, true, {DType::F32, Device::cpu(), mode});
}

// The e4m3 value torch's bf16 -> float8_e4m3fn cast gives, as f32.
float e4m3_of(float bf16_value) {
  return dtype_bits::f8e4m3fn_to_f32(dtype_bits::f32_to_f8e4m3fn(bf16_value));
}

TEST(Fp8CastPolicy, ChoosesTheReferencesLinears) {
  // fp8_cast.py: "transformer_blocks." in the name and one of the six suffixes; the FF suffixes
  // have no leading dot, so audio_ff matches too.
  const std::vector<std::pair<std::string, bool>> cases = {
      {"transformer_blocks.0.attn1.to_q", true},
      {"transformer_blocks.0.attn1.to_k", true},
      {"transformer_blocks.0.attn1.to_v", true},
      {"transformer_blocks.0.attn1.to_out.0", true},
      {"transformer_blocks.7.attn2.to_q", true},
      {"transformer_blocks.1.audio_attn1.to_v", true},
      {"transformer_blocks.1.audio_to_video_attn.to_out.0", true},
      {"transformer_blocks.1.video_to_audio_attn.to_k", true},
      {"transformer_blocks.0.ff.net.0.proj", true},
      {"transformer_blocks.0.ff.net.2", true},
      {"transformer_blocks.3.audio_ff.net.0.proj", true},
      {"transformer_blocks.3.audio_ff.net.2", true},
      {"transformer_blocks.0.attn1.to_gate_logits", false},
      {"transformer_blocks.0.attn1.q_norm", false},
      {"patchify_proj", false},
      {"proj_out", false},
      {"adaln_single.linear", false},
      {"adaln_single.emb.timestep_embedder.linear_1", false},
      {"caption_projection.linear_1", false},
      {"video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q", false},
      {"audio_embeddings_connector.transformer_1d_blocks.0.ff.net.2", false},
  };
  for (const auto& [name, selected] : cases) {
    EXPECT_EQ(quantization::is_fp8_cast_linear(name), selected) << name;
    EXPECT_EQ(quantization::is_fp8_cast_parameter(name + ".weight"), selected) << name;
    EXPECT_EQ(quantization::is_fp8_cast_parameter(name + ".bias"), selected) << name;
  }
  EXPECT_FALSE(quantization::is_fp8_cast_parameter("transformer_blocks.0.attn1.to_q.weight_scale"));
  EXPECT_FALSE(quantization::is_fp8_cast_parameter("transformer_blocks.0.scale_shift_table"));
}

TEST(Fp8CastLinear, StoresWeightAndBiasAsTheCastOfTheBf16Values) {
  const std::string module = "transformer_blocks.0.attn1.to_q";
  io::WeightMap w = one_linear(module, 24, 16);
  const Tensor w_bf16 = w.take_any_shape(module + ".weight", DType::BF16);
  const Tensor b_bf16 = w.take_any_shape(module + ".bias", DType::BF16);
  const nn::Linear l = load_scoped(w, module, 24, 16, Mode::Fp8Cast);
  EXPECT_EQ(l.format, nn::LinearFormat::Fp8Cast);
  ASSERT_EQ(l.weight.dtype(), DType::F8E4M3FN);
  ASSERT_EQ(l.bias.dtype(), DType::F8E4M3FN);
  const std::vector<float> src = w_bf16.to_float_vector(), got = l.weight.to_float_vector();
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(got[i], e4m3_of(src[i])) << i;
  const std::vector<float> bsrc = b_bf16.to_float_vector(), bgot = l.bias.to_float_vector();
  for (size_t i = 0; i < bsrc.size(); ++i) ASSERT_EQ(bgot[i], e4m3_of(bsrc[i])) << i;
}

TEST(Fp8CastLinear, EqualsTheDenseLinearOfItsDequantisedWeightsExactly) {
  const std::string module = "transformer_blocks.2.ff.net.0.proj";
  io::WeightMap w = one_linear(module, 32, 48);
  const nn::Linear q = load_scoped(w, module, 32, 48, Mode::Fp8Cast);
  ASSERT_EQ(q.format, nn::LinearFormat::Fp8Cast);
  nn::Linear dense;
  dense.weight = q.weight.to(DType::F32);  // e4m3 values are exact in f32
  dense.bias = q.bias.to(DType::F32);
  const Tensor x = test::random_tensor({2, 5, 32}, 3);
  EXPECT_EQ(test::max_abs_diff(q(x), dense(x)), 0.0);
  EXPECT_EQ(test::max_abs_diff(q.gelu_tanh(x), dense.gelu_tanh(x)), 0.0);
  EXPECT_EQ(test::max_abs_diff(q.gelu_tanh(x), ops::linear_gelu_tanh(x, dense.weight, dense.bias)),
            0.0);
  EXPECT_EQ(test::max_abs_diff(q.dense_weight(DType::F32), dense.weight), 0.0);
}

TEST(Fp8CastLinear, LeavesOtherLinearsAndModeNoneDense) {
  {
    const std::string module = "transformer_blocks.0.attn1.to_gate_logits";
    io::WeightMap w = one_linear(module, 16, 4);
    const nn::Linear l = load_scoped(w, module, 16, 4, Mode::Fp8Cast);
    EXPECT_EQ(l.format, nn::LinearFormat::Dense);
    EXPECT_EQ(l.weight.dtype(), DType::F32);
  }
  {
    const std::string module = "transformer_blocks.0.attn1.to_q";
    io::WeightMap w = one_linear(module, 16, 8);
    const nn::Linear l = load_scoped(w, module, 16, 8, Mode::None);
    EXPECT_EQ(l.format, nn::LinearFormat::Dense);
    EXPECT_EQ(l.weight.dtype(), DType::F32);
  }
}

TEST(Fp8CastLinear, ForEachParameterVisitsWeightThenBias) {
  const std::string module = "transformer_blocks.0.attn2.to_v";
  io::WeightMap w = one_linear(module, 8, 8);
  nn::Linear l = load_scoped(w, module, 8, 8, Mode::Fp8Cast);
  std::vector<std::string> roles;
  l.for_each_parameter([&](const char* role, Tensor& t) {
    roles.push_back(role);
    t = t.to(DType::F32);  // e.g. a streaming helper swapping in another copy
  });
  EXPECT_EQ(roles, (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(l.weight.dtype(), DType::F32);
  nn::Linear no_bias;
  no_bias.weight = Tensor::zeros({2, 2});
  int n = 0;
  static_cast<const nn::Linear&>(no_bias).for_each_parameter(
      [&](const char*, const Tensor&) { ++n; });
  EXPECT_EQ(n, 1);
}

TEST(Fp8CastScales, FoldsScalarScalesAsBf16OfTheProductAndDropsThem) {
  const std::string module = "transformer_blocks.0.attn1.to_k";
  const Tensor w8 = test::random_tensor({8, 16}, 5, -2.f, 2.f).to(DType::F8E4M3FN);
  const Tensor b = weights_bf16({8}, 6);
  const float scale = 0.0123f;
  io::WeightMap w;
  w.add(module + ".weight", w8);
  w.add(module + ".weight_scale", Tensor::full({}, scale, DType::F32));
  w.add(module + ".input_scale", Tensor::full({}, 0.5, DType::F32));
  w.add(module + ".bias", b);
  quantization::fold_prequant_scales(w, "model.safetensors");
  ASSERT_EQ(w.dtype(module + ".weight"), DType::BF16);
  const nn::Linear l = load_scoped(w, module, 16, 8, Mode::Fp8Cast);
  EXPECT_NO_THROW(w.finish("transformer"));  // the scales were consumed
  const std::vector<float> raw = w8.to_float_vector(), got = l.weight.to_float_vector();
  for (size_t i = 0; i < raw.size(); ++i) {
    const float folded = dtype_bits::bf16_to_f32(dtype_bits::f32_to_bf16(raw[i] * scale));
    ASSERT_EQ(got[i], e4m3_of(folded)) << i;
  }
}

TEST(Fp8CastScales, RejectsBlockwiseScalesAndOrphans) {
  {
    io::WeightMap w;
    w.add("transformer_blocks.0.attn1.to_q.weight", Tensor::zeros({256, 256}, DType::F8E4M3FN));
    w.add("transformer_blocks.0.attn1.to_q.weight_scale", Tensor::zeros({2, 2}));
    EXPECT_ERROR_HAS(quantization::fold_prequant_scales(w, "blockwise.safetensors"),
                     "blockwise.safetensors");
    EXPECT_ERROR_HAS(quantization::fold_prequant_scales(w, "blockwise.safetensors"),
                     "per-tensor (scalar) scales only");
  }
  {
    io::WeightMap w;
    w.add("transformer_blocks.0.attn1.to_q.weight_scale", Tensor::full({}, 1.0, DType::F32));
    EXPECT_ERROR_HAS(quantization::fold_prequant_scales(w, "orphan.safetensors"),
                     "has no parameter 'transformer_blocks.0.attn1.to_q.weight'");
  }
}

// --- a file's FP8 weights kept as stored (LoadOptions::keep_fp8_linears) -----------------------

nn::LoadOptions keep_fp8_bf16() {
  nn::LoadOptions o{DType::BF16, Device::cpu()};
  o.keep_fp8_linears = true;
  return o;
}

// A Linear "proj" of the file: an e4m3 weight [8, 16] (with a scalar weight_scale when `scale` > 0)
// and a bf16 bias.
io::WeightMap fp8_file_linear(float scale) {
  io::WeightMap w;
  w.add("proj.weight", test::random_tensor({8, 16}, 11, -3.f, 3.f).to(DType::F8E4M3FN));
  if (scale > 0) w.add("proj.weight_scale", Tensor::full({}, scale, DType::F32));
  w.add("proj.bias", weights_bf16({8}, 12));
  return w;
}

TEST(KeptFp8Linear, HoldsTheFilesE4m3WeightAndScaleAndGivesTheFoldedTwinsBits) {
  for (const float scale : {0.0123f, 0.f}) {
    io::WeightMap w = fp8_file_linear(scale);
    const nn::Linear kept = nn::Linear::load(w, "proj", 16, 8, true, keep_fp8_bf16());
    EXPECT_NO_THROW(w.finish("kept"));  // the scale is bound, not left over
    EXPECT_EQ(kept.format, nn::LinearFormat::Fp8Cast);
    EXPECT_EQ(kept.weight.dtype(), DType::F8E4M3FN);
    EXPECT_EQ(kept.weight_scale.defined(), scale > 0);
    EXPECT_EQ(kept.bias.dtype(), DType::BF16);

    // The reference's way: the scale folded at load, bf16(f32(w) * s), the layer dense in bf16.
    io::WeightMap f = fp8_file_linear(scale);
    if (scale > 0) quantization::fold_prequant_scales(f, "file.safetensors");
    const nn::Linear folded =
        nn::Linear::load(f, "proj", 16, 8, true, {DType::BF16, Device::cpu()});
    ASSERT_EQ(folded.format, nn::LinearFormat::Dense);
    // The CPU computes in f32 (the bf16 product is checked on the GPU, tests/cuda): the weight
    // the forward multiplies by is the folded one, bit for bit.
    EXPECT_TRUE(test::same_bits(kept.dense_weight(DType::BF16), folded.weight)) << scale;
    EXPECT_TRUE(test::same_bits(kept.dense_bias(DType::BF16), folded.bias)) << scale;
    int roles = 0;
    static_cast<const nn::Linear&>(kept).for_each_parameter([&](const char*, const Tensor&) { ++roles; });
    EXPECT_EQ(roles, scale > 0 ? 3 : 2);  // weight, bias (, weight_scale): streamed together
  }
}

TEST(KeptFp8Linear, DenseWeightsAndOtherModesAreUnaffectedAndABadScaleIsNamed) {
  {
    io::WeightMap w = one_linear("proj", 16, 8);  // a bf16 file weight: dense as ever
    EXPECT_EQ(nn::Linear::load(w, "proj", 16, 8, true, keep_fp8_bf16()).format,
              nn::LinearFormat::Dense);
  }
  {
    // Kept as stored before --quantization picks a format (the scaled GEMM would want an
    // input_scale the file does not have).
    io::WeightMap w = fp8_file_linear(0.5f);
    nn::LoadOptions o = keep_fp8_bf16();
    o.quantization = Mode::Fp8ScaledMm;
    EXPECT_EQ(nn::Linear::load(w, "proj", 16, 8, true, o).format, nn::LinearFormat::Fp8Cast);
  }
  {
    io::WeightMap w = fp8_file_linear(0.5f);
    w.add("proj.weight_scale", Tensor::full({}, 0.0, DType::F32));
    EXPECT_ERROR_HAS(nn::Linear::load(w, "proj", 16, 8, true, keep_fp8_bf16()),
                     "proj.weight_scale is 0");
  }
  {
    io::WeightMap w = fp8_file_linear(0.5f);
    w.add("proj.weight_scale", Tensor::full({2}, 0.5, DType::F32));  // not per-tensor
    (void)nn::Linear::load(w, "proj", 16, 8, true, keep_fp8_bf16());
    EXPECT_ERROR_HAS(w.finish("layer"), "proj.weight_scale");
  }
}

TEST(KeptFp8Linear, ASyntheticMapStandsInForAnFp8FileThroughItsStoredDtypes) {
  int made_f8 = 0, made_scales = 0;
  io::WeightMap w = io::WeightMap::synthetic(
      [&](const std::string& name, const Shape& shape, DType dtype, Device) {
        made_f8 += dtype == DType::F8E4M3FN;
        made_scales += name.ends_with("_scale");
        return name.ends_with("_scale") ? Tensor::full(shape, 0.25, dtype)
                                        : Tensor::full(shape, 1.0, dtype);
      },
      {},
      [](const std::string& name, const Shape&) -> std::optional<DType> {
        if (name == "proj.weight") return DType::F8E4M3FN;
        if (name == "proj.weight_scale") return DType::F32;
        return std::nullopt;
      });
  EXPECT_EQ(w.stored_dtype("proj.weight", {8, 16}), DType::F8E4M3FN);
  EXPECT_EQ(w.stored_dtype("other.weight", {8, 16}), std::nullopt);
  const nn::Linear l = nn::Linear::load(w, "proj", 16, 8, true, keep_fp8_bf16());
  EXPECT_EQ(l.format, nn::LinearFormat::Fp8Cast);
  EXPECT_EQ(made_f8, 1);
  EXPECT_EQ(made_scales, 1);
  EXPECT_FLOAT_EQ(static_cast<float>(l.weight_scale.item()), 0.25f);
  EXPECT_EQ(l.dense_weight(DType::F32).to_float_vector()[0], 0.25f);
  // Without the flag the same map is dense: nothing is kept.
  io::WeightMap d = io::WeightMap::synthetic(
      [](const std::string&, const Shape& shape, DType dtype, Device) {
        return Tensor::full(shape, 1.0, dtype);
      },
      {}, [](const std::string&, const Shape&) -> std::optional<DType> { return DType::F8E4M3FN; });
  EXPECT_EQ(nn::Linear::load(d, "proj", 16, 8, true, {DType::BF16, Device::cpu()}).format,
            nn::LinearFormat::Dense);
}

TEST(Fp8CastScales, KeepLeavesTheNamedWeightsScalesForTheirLinearAndFoldsTheRest) {
  io::WeightMap w = fp8_file_linear(0.5f);
  w.add("embed.weight", test::random_tensor({4, 4}, 14, -1.f, 1.f).to(DType::F8E4M3FN));
  w.add("embed.weight_scale", Tensor::full({}, 2.0, DType::F32));
  quantization::fold_prequant_scales(
      w, "file.safetensors", [](const std::string& param) { return param == "proj.weight"; });
  EXPECT_EQ(w.dtype("proj.weight"), DType::F8E4M3FN);
  EXPECT_TRUE(w.contains("proj.weight_scale"));
  EXPECT_EQ(w.dtype("embed.weight"), DType::BF16);  // folded
}

TEST(QuantizationMode, ParsesEveryModeAndListsAllSevenOnAnUnknownName) {
  EXPECT_EQ(quantization::parse_mode("none"), Mode::None);
  EXPECT_EQ(quantization::parse_mode("fp8-cast"), Mode::Fp8Cast);
  EXPECT_EQ(quantization::parse_mode("fp8-scaled-mm"), Mode::Fp8ScaledMm);
  EXPECT_EQ(quantization::parse_mode("fp8"), Mode::Fp8);
  EXPECT_EQ(quantization::parse_mode("nvfp4-cast"), Mode::Nvfp4Cast);
  EXPECT_EQ(quantization::parse_mode("nvfp4-prequant"), Mode::Nvfp4Prequant);
  EXPECT_EQ(quantization::parse_mode("fp8-blockwise"), Mode::Fp8Blockwise);
  EXPECT_EQ(quantization::available_modes(),
            "none, fp8-cast, fp8-scaled-mm, fp8, nvfp4-cast, nvfp4-prequant, fp8-blockwise");
  for (Mode m : {Mode::None, Mode::Fp8Cast, Mode::Fp8ScaledMm, Mode::Fp8, Mode::Nvfp4Cast,
                 Mode::Nvfp4Prequant, Mode::Fp8Blockwise})
    EXPECT_EQ(quantization::parse_mode(quantization::mode_name(m)), m);
  EXPECT_ERROR_HAS(quantization::parse_mode("fp4"),
                   "available: none, fp8-cast, fp8-scaled-mm, fp8, nvfp4-cast, nvfp4-prequant, "
                   "fp8-blockwise");
  EXPECT_ERROR_HAS(quantization::parse_mode("fp4"), "--quantization: unknown quantization 'fp4'");
}

// --------------------------------------------------------------- FP8 GEMM formats

// A pre-quantised FP8 layer as the reference's files hold it.
io::WeightMap one_fp8_scaled_linear(const std::string& module, int64_t in, int64_t out,
                                    float input_scale = 0.02f) {
  const ops::Fp8PerTensor q = ops::quantize_fp8_per_tensor(weights_bf16({out, in}, 1));
  io::WeightMap w;
  w.add(module + ".weight", q.weight);
  w.add(module + ".weight_scale", q.weight_scale);
  w.add(module + ".input_scale", Tensor::full({}, input_scale, DType::F32));
  w.add(module + ".bias", weights_bf16({out}, 2));
  return w;
}

TEST(Fp8ScaledLinear, BindsTheFilesScalesAndIsTheScaledFp8Op) {
  const std::string module = "transformer_blocks.0.attn1.to_q";
  io::WeightMap w = one_fp8_scaled_linear(module, 32, 16);
  const nn::Linear l = load_scoped(w, module, 32, 16, Mode::Fp8ScaledMm);
  EXPECT_NO_THROW(w.finish("transformer"));  // both scales taken
  ASSERT_EQ(l.format, nn::LinearFormat::Fp8Scaled);
  EXPECT_EQ(l.weight.dtype(), DType::F8E4M3FN);
  EXPECT_EQ(l.bias.dtype(), DType::F32);  // the compute dtype
  EXPECT_FLOAT_EQ(static_cast<float>(l.input_scale.item()), 0.02f);
  const Tensor x = test::random_tensor({2, 5, 32}, 7);
  const Tensor want = ops::linear_fp8_scaled(x, l.weight, l.weight_scale, l.input_scale, l.bias);
  EXPECT_EQ(test::max_abs_diff(l(x), want), 0.0);
  EXPECT_EQ(test::max_abs_diff(l.gelu_tanh(x), ops::gelu_tanh(want)), 0.0);
  // Dequantised for callers that need the dense weight.
  EXPECT_EQ(test::max_abs_diff(l.dense_weight(DType::F32),
                               ops::mul(l.weight.to(DType::F32), l.weight_scale)),
            0.0);
  std::vector<std::string> roles;
  static_cast<const nn::Linear&>(l).for_each_parameter(
      [&](const char* role, const Tensor&) { roles.push_back(role); });
  EXPECT_EQ(roles, (std::vector<std::string>{"weight", "bias", "weight_scale", "input_scale"}));
}

TEST(Fp8ScaledLinear, LayersWithoutAScaleInTheFileStayDense) {
  // The reference swaps only the layers the checkpoint stores FP8 with a scale, whatever their name.
  const std::string module = "transformer_blocks.0.attn1.to_q";
  io::WeightMap w = one_linear(module, 16, 8);
  EXPECT_EQ(load_scoped(w, module, 16, 8, Mode::Fp8ScaledMm).format, nn::LinearFormat::Dense);
  const std::string other = "transformer_blocks.0.scale_shift.proj";
  io::WeightMap q = one_fp8_scaled_linear(other, 16, 8);
  EXPECT_EQ(load_scoped(q, other, 16, 8, Mode::Fp8ScaledMm).format, nn::LinearFormat::Fp8Scaled);
}

TEST(Fp8ScaledLinear, RefusesAZeroScaleAndAMissingInputScaleNamingTheLayer) {
  const std::string module = "transformer_blocks.1.ff.net.2";
  io::WeightMap zero = one_fp8_scaled_linear(module, 16, 16, 0.0f);
  EXPECT_ERROR_HAS(load_scoped(zero, module, 16, 16, Mode::Fp8ScaledMm), module + ".input_scale");
  io::WeightMap w = one_fp8_scaled_linear(module, 16, 16);
  io::WeightMap none;
  for (const char* n : {".weight", ".weight_scale", ".bias"})
    none.add(module + n, w.take_any_shape(module + n, w.dtype(module + n)));
  EXPECT_ERROR_HAS(load_scoped(none, module, 16, 16, Mode::Fp8ScaledMm),
                   "layer '" + module + "' has a weight_scale but no input_scale");
  EXPECT_ERROR_HAS(load_scoped(none, module, 16, 16, Mode::Fp8ScaledMm), "--quantization fp8");
}

TEST(Fp8PerTokenLinear, QuantisesFp8CastsLayersPerTensorAtLoad) {
  const std::string module = "transformer_blocks.0.audio_ff.net.0.proj";
  io::WeightMap w = one_linear(module, 32, 48);
  const nn::Linear l = load_scoped(w, module, 32, 48, Mode::Fp8);
  EXPECT_NO_THROW(w.finish("transformer"));
  ASSERT_EQ(l.format, nn::LinearFormat::Fp8PerToken);
  const ops::Fp8PerTensor want = ops::quantize_fp8_per_tensor(weights_bf16({48, 32}, 1));
  EXPECT_EQ(test::max_abs_diff(l.weight.to(DType::F32), want.weight.to(DType::F32)), 0.0);
  EXPECT_EQ(l.weight_scale.item(), want.weight_scale.item());
  EXPECT_FALSE(l.input_scale.defined());
  EXPECT_EQ(l.bias.dtype(), DType::F32);
  const Tensor x = test::random_tensor({3, 32}, 8);
  EXPECT_EQ(test::max_abs_diff(l(x), ops::linear_fp8_per_token(x, l.weight, l.weight_scale, l.bias)),
            0.0);
  // Outside fp8-cast's layers: dense.
  const std::string proj = "transformer_blocks.0.attn1.to_gate_logits";
  io::WeightMap d = one_linear(proj, 16, 4);
  EXPECT_EQ(load_scoped(d, proj, 16, 4, Mode::Fp8).format, nn::LinearFormat::Dense);
}

TEST(Fp8PerTokenLinear, UsesAPreQuantisedLayerAsStoredAndIgnoresItsInputScale) {
  const std::string module = "transformer_blocks.0.attn1.to_k";
  io::WeightMap w = one_fp8_scaled_linear(module, 16, 16);
  const Tensor stored = w.take_any_shape(module + ".weight", DType::F8E4M3FN);
  w.add(module + ".weight", stored);
  const nn::Linear l = load_scoped(w, module, 16, 16, Mode::Fp8);
  EXPECT_NO_THROW(w.finish("transformer"));
  ASSERT_EQ(l.format, nn::LinearFormat::Fp8PerToken);
  EXPECT_EQ(test::max_abs_diff(l.weight.to(DType::F32), stored.to(DType::F32)), 0.0);
  EXPECT_FALSE(l.input_scale.defined());
}

// --------------------------------------------------------------- file formats

struct QuantFiles {
  test::TempDir dir;
  const std::string p = "model.diffusion_model.transformer_blocks.0.attn1.to_q.";

  std::string write(const std::string& name, std::vector<std::pair<std::string, Tensor>> t) {
    t.emplace_back("model.diffusion_model.proj_out.weight", Tensor::zeros({4, 4}, DType::BF16));
    const std::string path = dir.file(name);
    io::write_safetensors(path, t);
    return path;
  }
  std::string dense() { return write("dense.safetensors", {{p + "weight", Tensor::zeros({8, 8}, DType::BF16)}}); }
  std::string per_tensor() {
    return write("fp8.safetensors", {{p + "weight", Tensor::zeros({8, 8}, DType::F8E4M3FN)},
                                     {p + "weight_scale", Tensor::full({}, 1.0, DType::F32)},
                                     {p + "input_scale", Tensor::full({}, 1.0, DType::F32)}});
  }
  std::string unscaled() {
    return write("fp8_noscale.safetensors", {{p + "weight", Tensor::zeros({8, 8}, DType::F8E4M3FN)}});
  }
  std::string blockwise() {
    return write("fp8_block.safetensors", {{p + "weight", Tensor::zeros({256, 256}, DType::F8E4M3FN)},
                                           {p + "weight_scale", Tensor::zeros({2, 2})}});
  }
  std::string nvfp4() {
    return write("nvfp4.safetensors", {{p + "weight", Tensor::zeros({128, 32}, DType::U8)},
                                       {p + "weight_scale", Tensor::zeros({128, 4}, DType::F8E4M3FN)},
                                       {p + "weight_scale_2", Tensor::full({}, 1.0, DType::F32)}});
  }
};

quantization::FileQuantization inspect(const std::string& path) {
  return quantization::inspect_file(io::SafetensorsFile(path));
}

TEST(QuantizationFileFormat, TellsEachFormAndCountsItsLayers) {
  QuantFiles f;
  using quantization::FileFormat;
  const auto d = inspect(f.dense());
  EXPECT_EQ(d.format, FileFormat::Dense);
  EXPECT_EQ(d.dense_weights, 2);
  const auto s = inspect(f.per_tensor());
  EXPECT_EQ(s.format, FileFormat::Fp8PerTensor);
  EXPECT_EQ(s.fp8_per_tensor, 1);
  EXPECT_EQ(s.fp8_input_scales, 1);
  EXPECT_EQ(s.dense_weights, 1);
  EXPECT_EQ(inspect(f.unscaled()).format, FileFormat::Fp8NoScales);
  EXPECT_EQ(inspect(f.blockwise()).format, FileFormat::Fp8Blockwise);
  const auto n = inspect(f.nvfp4());
  EXPECT_EQ(n.format, FileFormat::Nvfp4);
  EXPECT_EQ(n.nvfp4, 1);
  EXPECT_NE(quantization::describe(s).find("FP8 per-tensor scaled: 1 Linear weights F8_E4M3 with a "
                                           "per-tensor weight_scale (1 with input_scale)"),
            std::string::npos)
      << quantization::describe(s);
}

TEST(QuantizationFileFormat, ModeThatCannotLoadTheFileIsOneLineNamingFileAndFittingModes) {
  QuantFiles f;
  const auto fits = [](const std::string& path, Mode m) {
    quantization::check_mode_fits(io::SafetensorsFile(path), m);
  };
  EXPECT_NO_THROW(fits(f.dense(), Mode::None));
  EXPECT_NO_THROW(fits(f.dense(), Mode::Fp8Cast));
  EXPECT_NO_THROW(fits(f.per_tensor(), Mode::Fp8Cast));
  EXPECT_NO_THROW(fits(f.unscaled(), Mode::Fp8Cast));
  EXPECT_NO_THROW(fits(f.unscaled(), Mode::None));
  EXPECT_NO_THROW(fits(f.per_tensor(), Mode::Fp8ScaledMm));
  EXPECT_NO_THROW(fits(f.per_tensor(), Mode::Fp8));
  EXPECT_NO_THROW(fits(f.dense(), Mode::Fp8));
  EXPECT_NO_THROW(fits(f.unscaled(), Mode::Fp8));
  const std::string dense = f.dense();
  EXPECT_ERROR_HAS(fits(dense, Mode::Fp8ScaledMm), dense + " has no F8_E4M3 '.weight'");
  EXPECT_ERROR_HAS(fits(f.unscaled(), Mode::Fp8ScaledMm), "use --quantization fp8-cast");

  const std::string fp8 = f.per_tensor();
  EXPECT_ERROR_HAS(fits(fp8, Mode::None), fp8 + " is a FP8 per-tensor scaled checkpoint");
  EXPECT_ERROR_HAS(fits(fp8, Mode::None), "use --quantization fp8-cast, fp8-scaled-mm");
  const std::string nv = f.nvfp4();
  EXPECT_ERROR_HAS(fits(nv, Mode::Fp8Cast), nv + " is a NVFP4 checkpoint");
  EXPECT_ERROR_HAS(fits(nv, Mode::Fp8Cast), "use --quantization nvfp4-prequant");
  const std::string block = f.blockwise();
  EXPECT_ERROR_HAS(fits(block, Mode::Fp8Cast), block + " is a blockwise FP8 checkpoint");
  EXPECT_ERROR_HAS(fits(block, Mode::Fp8Cast), "use --quantization fp8-blockwise");
  EXPECT_ERROR_HAS(fits(block, Mode::None), "use --quantization fp8-blockwise");
  EXPECT_NO_THROW(fits(block, Mode::Fp8Blockwise));
  EXPECT_NO_THROW(fits(f.dense(), Mode::Fp8Blockwise));
  EXPECT_ERROR_HAS(fits(fp8, Mode::Fp8Blockwise), "cannot load it, use --quantization fp8-cast");
  const std::string msg = test::error_of([&] { fits(nv, Mode::None); });
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

// --------------------------------------------------------------- blockwise FP8

TEST(Fp8BlockwisePolicy, ChoosesEveryBlockLinearButTheReferencesExclusions) {
  using quantization::is_fp8_blockwise_linear;
  for (const char* m : {"transformer_blocks.0.attn1.to_q", "transformer_blocks.3.attn2.to_out.0",
                        "transformer_blocks.1.audio_ff.net.0.proj", "transformer_blocks.2.ff.net.2",
                        "transformer_blocks.7.audio_to_video_attn.to_v",
                        "transformer_blocks.7.video_to_audio_attn.to_k"})
    EXPECT_TRUE(is_fp8_blockwise_linear(m)) << m;
  for (const char* m : {"transformer_blocks.0.attn1.to_gate_logits", "proj_out", "patchify_proj",
                        "adaln_single.linear", "audio_caption_projection.linear_1",
                        "video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q"})
    EXPECT_FALSE(is_fp8_blockwise_linear(m)) << m;
}

TEST(Fp8BlockwiseLinear, QuantisesTheBlocksLayersAtLoadAndIsTheBlockwiseOp) {
  const std::string module = "transformer_blocks.0.ff.net.0.proj";
  io::WeightMap w = one_linear(module, 256, 160);
  const nn::Linear l = load_scoped(w, module, 256, 160, Mode::Fp8Blockwise);
  EXPECT_NO_THROW(w.finish("transformer"));
  ASSERT_EQ(l.format, nn::LinearFormat::Fp8Blockwise);
  const ops::Fp8Blockwise want = ops::quantize_fp8_blockwise(weights_bf16({160, 256}, 1));
  EXPECT_EQ(test::max_abs_diff(l.weight.to(DType::F32), want.weight.to(DType::F32)), 0.0);
  EXPECT_EQ(test::max_abs_diff(l.weight_scale, want.weight_scale), 0.0);
  EXPECT_EQ(l.weight_scale.shape(), Shape({2, 2}));
  EXPECT_EQ(l.bias.dtype(), DType::F32);  // the compute dtype
  const Tensor x = test::random_tensor({2, 3, 256}, 9);
  const Tensor y = ops::linear_fp8_blockwise(x, l.weight, l.weight_scale, l.bias);
  EXPECT_EQ(test::max_abs_diff(l(x), y), 0.0);
  EXPECT_EQ(test::max_abs_diff(l.gelu_tanh(x), ops::gelu_tanh(y)), 0.0);
  EXPECT_EQ(test::max_abs_diff(l.dense_weight(DType::F32),
                               ops::dequantize_fp8_blockwise(l.weight, l.weight_scale, DType::F32)),
            0.0);
  std::vector<std::string> roles;
  static_cast<const nn::Linear&>(l).for_each_parameter(
      [&](const char* role, const Tensor&) { roles.push_back(role); });
  EXPECT_EQ(roles, (std::vector<std::string>{"weight", "bias", "weight_scale"}));
  const std::string gate = "transformer_blocks.0.attn1.to_gate_logits";
  io::WeightMap g = one_linear(gate, 16, 4);
  EXPECT_EQ(load_scoped(g, gate, 16, 4, Mode::Fp8Blockwise).format, nn::LinearFormat::Dense);
}

TEST(Fp8BlockwiseLinear, UsesABlockwiseFilesLayerAsStoredAndChecksItsScaleShape) {
  const std::string module = "transformer_blocks.0.attn1.to_k";
  const ops::Fp8Blockwise q = ops::quantize_fp8_blockwise(weights_bf16({130, 256}, 3));
  io::WeightMap w;
  w.add(module + ".weight", q.weight);
  w.add(module + ".weight_scale", q.weight_scale);
  w.add(module + ".bias", weights_bf16({130}, 2));
  EXPECT_TRUE(quantization::file_has_fp8_blockwise(w, module));
  const nn::Linear l = load_scoped(w, module, 256, 130, Mode::Fp8Blockwise);
  EXPECT_NO_THROW(w.finish("transformer"));
  ASSERT_EQ(l.format, nn::LinearFormat::Fp8Blockwise);
  EXPECT_EQ(test::max_abs_diff(l.weight.to(DType::F32), q.weight.to(DType::F32)), 0.0);
  EXPECT_EQ(test::max_abs_diff(l.weight_scale, q.weight_scale), 0.0);
  io::WeightMap bad;
  bad.add(module + ".weight", q.weight);
  bad.add(module + ".weight_scale", Tensor::full({1, 2}, 1.0, DType::F32));
  bad.add(module + ".bias", weights_bf16({130}, 2));
  // The map records a shape mismatch and reports it, with the others, when the load finishes.
  (void)load_scoped(bad, module, 256, 130, Mode::Fp8Blockwise);
  EXPECT_ERROR_HAS(bad.finish("transformer"), module + ".weight_scale");
}

TEST(Fp8BlockwiseLinear, AZeroTileIsAnErrorNamingTheLayer) {
  const std::string module = "transformer_blocks.2.attn1.to_v";
  io::WeightMap w;
  w.add(module + ".weight", Tensor::zeros({16, 16}, DType::BF16));
  w.add(module + ".bias", weights_bf16({16}, 2));
  EXPECT_ERROR_HAS(load_scoped(w, module, 16, 16, Mode::Fp8Blockwise),
                   "--quantization fp8-blockwise: layer '" + module + "'");
  EXPECT_ERROR_HAS(load_scoped(w, module, 16, 16, Mode::Fp8Blockwise), "all zeros");
}

}  // namespace
}  // namespace ltx::linear_test
