// `ltx quantize` / `ltx convert` as library calls (quantization/checkpoint_export.h and the GGUF
// policy of quantization/gguf_policy.h) on a tiny checkpoint made in the test: the files re-open
// with the strict readers, hold the community layout, and dequantise within each type's bound.
#include "quantization/checkpoint_export.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io/gguf.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "quantization/file_format.h"
#include "quantization/fp8_cast.h"
#include "quantization/ggml_dequant.h"
#include "quantization/gguf_policy.h"
#include "support/test_support.h"
#include "support/tiny_transformer_checkpoint.h"

namespace ltx::checkpoint_export_test {
namespace {

using quantization::community_gguf_type;
using quantization::parse_gguf_quant_type;
using test::expect_error_containing;
using test::TempDir;

constexpr const char* kPrefix = "model.diffusion_model.";

double rel_rms(const Tensor& got, const Tensor& want) {
  const Tensor a = got.to(DType::F32).contiguous(), b = want.to(DType::F32).contiguous();
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = double(a.data<float>()[i]) - b.data<float>()[i];
    num += d * d;
    den += double(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num / den);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

quantization::ExportSummary quantize(const std::string& in, const std::string& type,
                                     const std::string& out) {
  quantization::QuantizeOptions o;
  o.inputs = {in};
  o.type = type;
  o.output = out;
  return quantization::quantize_checkpoint(o);
}

TEST(GgufPolicy, FollowsTheCommunityRules) {
  const auto q4km = *parse_gguf_quant_type("q4_k_m");
  const auto q8 = *parse_gguf_quant_type("Q8_0");
  const GgmlType bf16 = GgmlType::BF16;
  auto type = [&](const std::string& n, Shape s, const quantization::GgufQuantType& t) {
    return community_gguf_type(n, s, bf16, t);
  };
  EXPECT_EQ(type("transformer_blocks.0.attn1.to_q.weight", {4096, 4096}, q4km), GgmlType::Q4_K);
  EXPECT_EQ(type("transformer_blocks.0.attn1.to_v.weight", {4096, 4096}, q4km), GgmlType::Q6_K);
  EXPECT_EQ(type("transformer_blocks.0.audio_ff.net.2.weight", {2048, 8192}, q4km), GgmlType::Q6_K);
  EXPECT_EQ(type("transformer_blocks.0.attn1.to_v.weight", {4096, 4096}, q8), GgmlType::Q8_0);
  EXPECT_EQ(type("transformer_blocks.0.attn1.to_q.bias", {4096}, q4km), GgmlType::F32);
  EXPECT_EQ(type("transformer_blocks.0.attn1.to_gate_logits.weight", {32, 4096}, q4km),
            GgmlType::Q4_K);
  EXPECT_EQ(type("transformer_blocks.0.attn1.to_gate_logits.bias", {32}, q4km), GgmlType::F32);
  EXPECT_EQ(type("transformer_blocks.0.scale_shift_table", {9, 4096}, q4km), GgmlType::F32);
  EXPECT_EQ(type("small.weight", {4, 256}, q4km), GgmlType::F32);  // <= 1024 values
  for (const char* kept : {"adaln_single.linear.weight", "audio_adaln_single.linear.weight",
                           "av_ca_video_scale_shift_adaln_single.linear.weight",
                           "prompt_adaln_single.emb.timestep_embedder.linear_2.weight",
                           "caption_projection.linear_1.weight", "audio_patchify_proj.weight",
                           "audio_proj_out.weight", "proj_out.weight",
                           "video_embeddings_connector.learnable_registers"})
    EXPECT_EQ(type(kept, {4096, 4096}, q4km), GgmlType::BF16) << kept;
  EXPECT_EQ(type("x.weight", {64, 4, 4, 4}, q8), GgmlType::BF16);  // not 2-D
  // Rows that are not whole K blocks stay in the source's type; Q8_0's 32 fit.
  EXPECT_EQ(type("transformer_blocks.0.attn1.to_q.weight", {64, 64}, q4km), GgmlType::BF16);
  EXPECT_EQ(community_gguf_type("a.weight", {64, 64}, GgmlType::F32, q4km), GgmlType::F32);
  EXPECT_EQ(type("transformer_blocks.0.attn1.to_q.weight", {64, 64}, q8), GgmlType::Q8_0);
  // Dense targets: convert.py's first stage.
  const auto b16 = *parse_gguf_quant_type("BF16");
  EXPECT_EQ(type("adaln_single.linear.weight", {64, 64}, b16), GgmlType::BF16);
  EXPECT_EQ(type("adaln_single.linear.bias", {64}, b16), GgmlType::F32);
  EXPECT_FALSE(parse_gguf_quant_type("Q2_K").has_value());
  EXPECT_EQ(parse_gguf_quant_type("q4_k_s")->name, "Q4_K");
}

TEST(QuantizeCheckpoint, GgufHoldsTheTransformerInTheCommunityLayout) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors"), out = dir.file("q.gguf");
  const auto src = test::write_tiny_transformer_checkpoint(in);
  const quantization::ExportSummary s = quantize(in, "Q4_K_M", out);

  const io::GgufFile f(out);
  EXPECT_EQ(f.string_value("general.architecture"), "ltxv");
  EXPECT_EQ(f.find("general.quantization_version")->value, 2);
  EXPECT_EQ(f.find("general.file_type")->value, 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  EXPECT_EQ(f.string_value("config"), test::tiny_transformer_metadata().at("config"));
  EXPECT_EQ(f.string_value("model_version"), "2.3.0");
  EXPECT_EQ(f.find("general.alignment"), nullptr);
  EXPECT_EQ(f.size(), src.size() - 1);  // the VAE tensor is left out
  EXPECT_EQ(s.left_out, 1);
  EXPECT_EQ(s.format, "GGUF");
  EXPECT_EQ(s.file_bytes, f.file_size());

  const std::map<std::string, GgmlType> want = {
      {"adaln_single.linear.weight", GgmlType::BF16},
      {"adaln_single.linear.bias", GgmlType::F32},
      {"patchify_proj.weight", GgmlType::BF16},
      {"proj_out.weight", GgmlType::BF16},
      {"scale_shift_table", GgmlType::F32},
      {"transformer_blocks.0.scale_shift_table", GgmlType::F32},
      {"transformer_blocks.0.attn1.to_q.weight", GgmlType::Q4_K},
      {"transformer_blocks.0.attn1.to_q.bias", GgmlType::F32},
      {"transformer_blocks.0.attn1.to_v.weight", GgmlType::Q6_K},
      {"transformer_blocks.0.attn1.q_norm.weight", GgmlType::F32},
      {"transformer_blocks.0.attn1.to_gate_logits.weight", GgmlType::F32},
      {"transformer_blocks.0.ff.net.0.proj.weight", GgmlType::Q4_K},
      {"transformer_blocks.0.ff.net.2.weight", GgmlType::Q6_K},
      {"transformer_blocks.0.audio_attn1.to_k.weight", GgmlType::BF16},  // rows of 64
      {"video_embeddings_connector.learnable_registers", GgmlType::BF16},
  };
  int64_t tensors = 0;
  for (const auto& [name, t] : src) {
    if (!name.starts_with(kPrefix)) continue;
    const std::string bare = name.substr(std::strlen(kPrefix));
    ASSERT_TRUE(f.contains(bare)) << bare;
    const io::GgufTensorInfo& ti = f.info(bare);
    EXPECT_EQ(ti.type, want.at(bare)) << bare;
    EXPECT_EQ(ti.shape, t.shape()) << bare;
    const Tensor back = quantization::dequantize(f.ggml_tensor(bare), DType::F32);
    if (ggml_is_quantized(ti.type))
      EXPECT_LT(rel_rms(back, t), ti.type == GgmlType::Q6_K ? 0.025 : 0.1) << bare;
    else
      EXPECT_TRUE(same_bytes(back, t.to(DType::F32))) << bare;  // kept exactly
    ++tensors;
  }
  EXPECT_EQ(s.tensors, tensors);
  EXPECT_EQ(s.types.at("Q4_K").tensors, 2);
  EXPECT_EQ(s.types.at("Q6_K").tensors, 2);
}

TEST(QuantizeCheckpoint, EveryTypeDequantisesWithinItsBound) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors");
  const auto src = test::write_tiny_transformer_checkpoint(in);
  const Tensor& ff0 = src[11].second;  // ff.net.0.proj.weight [512, 256]
  ASSERT_EQ(src[11].first, std::string(kPrefix) + "transformer_blocks.0.ff.net.0.proj.weight");
  const struct { const char* type; GgmlType stored; double bound; uint32_t file_type; } cases[] = {
      {"Q8_0", GgmlType::Q8_0, 0.006, 7}, {"Q6_K", GgmlType::Q6_K, 0.025, 18},
      {"Q5_K", GgmlType::Q5_K, 0.05, 16}, {"Q4_K", GgmlType::Q4_K, 0.1, 14},
      {"Q5_0", GgmlType::Q5_0, 0.05, 8},  {"Q4_0", GgmlType::Q4_0, 0.10, 2},
  };
  double previous = 0;
  for (const auto& c : cases) {
    const std::string out = dir.file(std::string(c.type) + ".gguf");
    const quantization::ExportSummary s = quantize(in, c.type, out);
    const io::GgufFile f(out);
    EXPECT_EQ(f.find("general.file_type")->value, c.file_type) << c.type;
    const io::GgmlTensor q = f.ggml_tensor("transformer_blocks.0.ff.net.0.proj.weight");
    EXPECT_EQ(q.type, c.stored) << c.type;
    const double err = rel_rms(quantization::dequantize(q), ff0);
    EXPECT_LT(err, c.bound) << c.type;
    if (c.stored == GgmlType::Q6_K || c.stored == GgmlType::Q5_K || c.stored == GgmlType::Q4_K) {
      EXPECT_GT(err, previous) << c.type;
      previous = err;
    }
    EXPECT_LT(s.bits_per_weight, 16.0) << c.type;
  }
}

TEST(QuantizeCheckpoint, Fp8WritesTheOfficialLayout) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors"), out = dir.file("ckpt-fp8.safetensors");
  const auto src = test::write_tiny_transformer_checkpoint(in);
  const quantization::ExportSummary s = quantize(in, "fp8", out);
  const io::SafetensorsFile f(out);
  EXPECT_EQ(f.metadata(), test::tiny_transformer_metadata());
  const quantization::FileQuantization fq = quantization::inspect_file(f);
  EXPECT_EQ(fq.format, quantization::FileFormat::Fp8PerTensor);
  EXPECT_EQ(fq.fp8_per_tensor, 5);  // to_q, to_v, ff.net.0.proj, ff.net.2, audio to_k
  EXPECT_EQ(fq.fp8_input_scales, 0);
  EXPECT_EQ(s.types.at("F8_E4M3").tensors, 5);
  for (const auto& [name, t] : src) {
    const std::string module = name.substr(0, name.rfind('.'));
    const bool fp8 = name.ends_with(".weight") && quantization::is_fp8_cast_linear(
                                                      module.substr(std::min(module.size(), std::strlen(kPrefix))));
    if (!fp8) {
      EXPECT_TRUE(same_bytes(f.tensor(name), t)) << name;  // every other tensor as it was
      continue;
    }
    EXPECT_EQ(f.info(name).dtype, DType::F8E4M3FN) << name;
    const Tensor scale = f.tensor(name + "_scale");
    EXPECT_EQ(scale.dtype(), DType::F32);
    EXPECT_EQ(scale.shape().size(), 0) << name;
    Tensor back = f.tensor(name).to(DType::F32).contiguous();
    for (int64_t i = 0; i < back.numel(); ++i) back.data<float>()[i] *= scale.data<float>()[0];
    EXPECT_LT(rel_rms(back, t), 0.05) << name;  // e4m3: 3 mantissa bits
  }
}

TEST(QuantizeCheckpoint, Fp8MatchesTheReferencesQuantisedCheckpoint) {
  // tests/fixtures/ltx23.fp8_scaled.weights: the reference's quantize_weight_to_fp8_per_tensor
  // on every fp8-cast Linear of ltx23.weights.bf16 (plus calibrated input scales, which ltx
  // does not write). Every other tensor and the metadata come from the bf16 file.
  TempDir dir;
  const std::string out = dir.file("fp8.safetensors");
  quantize(test::fixture("ltx23.weights.bf16.safetensors"), "fp8", out);
  const io::SafetensorsFile got(out);
  const io::SafetensorsFile want(test::fixture("ltx23.fp8_scaled.weights.safetensors"));
  EXPECT_EQ(got.metadata(), want.metadata());
  int64_t fp8 = 0;
  for (const std::string& name : want.names()) {
    if (name.ends_with(".input_scale")) {
      EXPECT_FALSE(got.contains(name)) << name;
      continue;
    }
    ASSERT_TRUE(got.contains(name)) << name;
    EXPECT_TRUE(same_bytes(got.tensor(name), want.tensor(name))) << name;
    fp8 += want.info(name).dtype == DType::F8E4M3FN;
  }
  EXPECT_GT(fp8, 0);
  EXPECT_EQ(got.size() + static_cast<size_t>(fp8), want.size());  // one input_scale per layer
}

TEST(ConvertCheckpoint, SafetensorsToGgufAndBackIsExact) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors"), gguf = dir.file("t.gguf"),
                    back = dir.file("back.safetensors");
  const auto src = test::write_tiny_transformer_checkpoint(in);
  quantization::ConvertOptions o;
  o.inputs = {in};
  o.target = quantization::ConvertTarget::Gguf;
  o.output = gguf;
  quantization::convert_checkpoint(o);
  EXPECT_EQ(io::GgufFile(gguf).info("transformer_blocks.0.attn1.to_q.weight").type, GgmlType::BF16);
  o.inputs = {gguf};
  o.target = quantization::ConvertTarget::Safetensors;
  o.output = back;
  const quantization::ExportSummary s = quantization::convert_checkpoint(o);
  const io::SafetensorsFile f(back);
  EXPECT_EQ(f.metadata(), test::tiny_transformer_metadata());
  EXPECT_EQ(static_cast<int64_t>(f.size()), s.tensors);
  for (const auto& [name, t] : src) {
    if (!name.starts_with(kPrefix)) continue;  // the VAE stays in the original file only
    ASSERT_TRUE(f.contains(name)) << name;
    EXPECT_TRUE(same_bytes(f.tensor(name), t)) << name;
  }
}

TEST(ConvertCheckpoint, ConversionsThatRoundAreRefusedUnlessAllowed) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors"), out = dir.file("o.gguf");
  test::write_tiny_transformer_checkpoint(in);
  quantization::ConvertOptions o;
  o.inputs = {in};
  o.target = quantization::ConvertTarget::GgufF16;
  o.output = out;
  expect_error_containing([&] { quantization::convert_checkpoint(o); },
                          {"would change values", "BF16 -> F16", "--allow-lossy"});
  EXPECT_FALSE(std::filesystem::exists(out));
  o.allow_lossy = true;
  quantization::convert_checkpoint(o);
  EXPECT_EQ(io::GgufFile(out).info("proj_out.weight").type, GgmlType::F16);
  EXPECT_EQ(io::GgufFile(out).find("general.file_type")->value, 1);

  // A quantized GGUF back to safetensors: exact in f32, rounding in bf16.
  const std::string q = dir.file("q.gguf"), st = dir.file("q.safetensors");
  quantize(in, "Q4_K", q);
  quantization::ConvertOptions c;
  c.inputs = {q};
  c.output = st;
  expect_error_containing([&] { quantization::convert_checkpoint(c); },
                          {"would change values", "Q4_K -> bf16", "--dtype f32", "--allow-lossy"});
  EXPECT_FALSE(std::filesystem::exists(st));
  c.dequantize_to = DType::F32;
  quantization::convert_checkpoint(c);
  const std::string name = "transformer_blocks.0.attn1.to_q.weight";
  EXPECT_TRUE(same_bytes(io::SafetensorsFile(st).tensor(kPrefix + name),
                         quantization::dequantize(io::GgufFile(q).ggml_tensor(name))));
}

TEST(QuantizeCheckpoint, BadRequestsFailBeforeWritingAnything) {
  TempDir dir;
  const std::string in = dir.file("ckpt.safetensors"), out = dir.file("o.gguf");
  test::write_tiny_transformer_checkpoint(in);
  expect_error_containing([&] { quantize(in, "Q3_K", out); },
                          {"unknown --type 'Q3_K'", "Q4_K_M", "fp8"});
  expect_error_containing([&] { quantize(dir.file("missing.safetensors"), "Q8_0", out); },
                          {"missing.safetensors", "no such file"});
  expect_error_containing([&] { quantize(in, "Q8_0", in); }, {"is the input"});
  expect_error_containing([&] { quantize(in, "Q8_0", dir.file("no/such/dir/o.gguf")); },
                          {"does not exist"});
  EXPECT_FALSE(std::filesystem::exists(out));

  // An existing output needs --overwrite and is left alone without it.
  test::write_bytes(out, "keep me");
  expect_error_containing([&] { quantize(in, "Q8_0", out); }, {"exists", "--overwrite"});
  EXPECT_EQ(test::read_bytes(out), "keep me");
  quantization::QuantizeOptions o{{in}, "Q8_0", out, true, {}};
  quantization::quantize_checkpoint(o);
  EXPECT_EQ(io::GgufFile(out).string_value("general.architecture"), "ltxv");

  // Not an LTX transformer; a quantized input; NaN weights; fp8 from GGUF.
  const std::string other = dir.file("other.safetensors");
  io::write_safetensors(other, {{"model.layers.0.weight", Tensor::zeros({4, 4})}});
  expect_error_containing([&] { quantize(other, "Q8_0", dir.file("x.gguf")); },
                          {"other.safetensors", "no LTX transformer"});
  expect_error_containing([&] { quantize(out, "Q4_K", dir.file("x.gguf")); },
                          {"already quantised", "Q8_0"});
  expect_error_containing([&] { quantize(out, "fp8", dir.file("x.safetensors")); },
                          {"fp8", "GGUF"});
  auto tensors = test::write_tiny_transformer_checkpoint(in);
  tensors[6].second = tensors[6].second.to(DType::F32).contiguous();
  tensors[6].second.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  io::write_safetensors(in, tensors);
  expect_error_containing([&] { quantize(in, "Q4_K", dir.file("x.gguf")); },
                          {"to_q.weight", "non-finite"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.gguf.tmp")));
}

}  // namespace
}  // namespace ltx::checkpoint_export_test
