#include "io/weights.h"

#include <gtest/gtest.h>

#include "io/io_test_util.h"
#include "support/test_support.h"

namespace ltx {
namespace {

using io::KeyMap;
using io::SafetensorsFile;
using io::WeightMap;
using io::write_safetensors;
using test::expect_error_containing;
using test::TempDir;

TEST(KeyMap, StripPrefixKeepsOnlyThatPrefixAndRemovesIt) {
  const KeyMap k = KeyMap::strip_prefix("model.diffusion_model.");
  EXPECT_EQ(k.apply("model.diffusion_model.proj_out.weight"), "proj_out.weight");
  EXPECT_EQ(k.apply("vae.decoder.conv_in.conv.weight"), std::nullopt);
  EXPECT_EQ(k.apply("model.diffusion_model"), std::nullopt);
  // Only the leading occurrence goes.
  EXPECT_EQ(k.apply("model.diffusion_model.x.model.diffusion_model.y"),
            "x.model.diffusion_model.y");
}

TEST(KeyMap, ReplaceSwapsEveryOccurrenceLikePython) {
  KeyMap k("lora");
  k.keep("").replace("diffusion_model.", "");
  EXPECT_EQ(k.apply("diffusion_model.a.diffusion_model.b"), "a.b");
  KeyMap r("r");
  r.keep("").replace("aa", "b");
  EXPECT_EQ(r.apply("aaa"), "ba");  // non-overlapping, left to right
  EXPECT_EQ(r.apply("xyz"), "xyz");
}

TEST(KeyMap, ReplacementsApplyInOrderAndMatchersAreAlternatives) {
  // The reference's audio VAE decoder filter: two prefixes kept, each renamed.
  KeyMap k("audio decoder");
  k.keep("audio_vae.decoder.")
      .keep("audio_vae.per_channel_statistics.")
      .replace("audio_vae.decoder.", "")
      .replace("audio_vae.per_channel_statistics.", "per_channel_statistics.");
  EXPECT_EQ(k.apply("audio_vae.decoder.conv_in.conv.weight"), "conv_in.conv.weight");
  EXPECT_EQ(k.apply("audio_vae.per_channel_statistics.mean-of-means"),
            "per_channel_statistics.mean-of-means");
  EXPECT_EQ(k.apply("audio_vae.encoder.conv_in.conv.weight"), std::nullopt);
  // Vocoder: exactly one leading "vocoder." goes, so BWE keys keep their inner "vocoder.".
  KeyMap v("vocoder");
  v.keep("vocoder.").replace_prefix("vocoder.", "");
  EXPECT_EQ(v.apply("vocoder.vocoder.conv_pre.weight"), "vocoder.conv_pre.weight");
  EXPECT_EQ(v.apply("vocoder.conv_pre.weight"), "conv_pre.weight");
}

TEST(KeyMap, SuffixContainsAndDropRules) {
  KeyMap k("k");
  k.keep("", ".weight")
      .keep("", "", "scale_shift")
      .drop("model.diffusion_model.video_embeddings_connector.");
  EXPECT_EQ(k.apply("a.weight"), "a.weight");
  EXPECT_EQ(k.apply("a.bias"), std::nullopt);
  EXPECT_EQ(k.apply("blk.scale_shift_table"), "blk.scale_shift_table");
  EXPECT_EQ(k.apply("model.diffusion_model.video_embeddings_connector.x.weight"), std::nullopt);
  EXPECT_EQ(KeyMap("none").apply("anything"), std::nullopt);  // no matcher keeps nothing
  EXPECT_EQ(KeyMap::all().apply("anything"), "anything");
}

class WeightMapTest : public ::testing::Test {
 protected:
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  Tensor q = test::random_tensor({4, 4}, 1);
  Tensor k = test::random_tensor({4, 4}, 2);
  Tensor bias = test::random_tensor({4}, 3);

  void SetUp() override {
    write_safetensors(path, {{"model.diffusion_model.blocks.0.to_q.weight", q},
                             {"model.diffusion_model.blocks.0.to_k.weight", k.to(DType::BF16)},
                             {"model.diffusion_model.blocks.0.to_k.bias", bias.to(DType::F16)},
                             {"model.diffusion_model.blocks.1.to_q.weight", q.to(DType::F8E4M3FN)},
                             {"model.diffusion_model.proj_out.weight", q},
                             {"model.diffusion_model.ids", Tensor::zeros({3}, DType::I64)},
                             {"vae.decoder.conv_in.weight", k},
                             {"text_embedding_projection.aggregate_embed.weight", k}});
  }
  WeightMap dit() {
    return WeightMap::open({path}, KeyMap::strip_prefix("model.diffusion_model."));
  }
};

TEST_F(WeightMapTest, BindsOnlyThePrefixedComponent) {
  WeightMap w = dit();
  EXPECT_EQ(w.names(), (std::vector<std::string>{"blocks.0.to_k.bias", "blocks.0.to_k.weight",
                                                 "blocks.0.to_q.weight", "blocks.1.to_q.weight",
                                                 "ids", "proj_out.weight"}));
  EXPECT_FALSE(w.contains("vae.decoder.conv_in.weight"));
  EXPECT_EQ(w.shape("blocks.0.to_k.weight"), Shape({4, 4}));
  EXPECT_EQ(w.dtype("blocks.0.to_k.weight"), DType::BF16);
  expect_error_containing([&] { w.shape("nope"); }, {"'nope'"});
}

TEST_F(WeightMapTest, SameDtypeOnCpuIsAZeroCopyViewOfTheFile) {
  auto file = SafetensorsFile::open(path);
  WeightMap w({file}, KeyMap::strip_prefix("model.diffusion_model."));
  const Tensor t = w.take("blocks.0.to_q.weight", {4, 4}, DType::F32);
  ASSERT_TRUE(t.defined());
  EXPECT_EQ(t.raw_data(), static_cast<const void*>(
                              file->tensor_bytes("model.diffusion_model.blocks.0.to_q.weight")));
  EXPECT_EQ(test::max_abs_diff(t, q), 0.0);
  const Tensor kb = w.take("blocks.0.to_k.weight", {4, 4}, DType::BF16);
  EXPECT_EQ(kb.raw_data(), static_cast<const void*>(
                               file->tensor_bytes("model.diffusion_model.blocks.0.to_k.weight")));
}

TEST_F(WeightMapTest, ConvertsLowPrecisionFloatsToF32ByCopy) {
  auto file = SafetensorsFile::open(path);
  WeightMap w({file}, KeyMap::strip_prefix("model.diffusion_model."));
  const Tensor kf = w.take("blocks.0.to_k.weight", {4, 4}, DType::F32);
  EXPECT_EQ(kf.dtype(), DType::F32);
  EXPECT_NE(kf.raw_data(), static_cast<const void*>(
                               file->tensor_bytes("model.diffusion_model.blocks.0.to_k.weight")));
  EXPECT_EQ(test::max_abs_diff(kf, k.to(DType::BF16).to(DType::F32)), 0.0);
  EXPECT_EQ(test::max_abs_diff(w.take("blocks.0.to_k.bias", {4}, DType::F32),
                               bias.to(DType::F16).to(DType::F32)),
            0.0);
  EXPECT_EQ(test::max_abs_diff(w.take("blocks.1.to_q.weight", {4, 4}, DType::F32),
                               q.to(DType::F8E4M3FN).to(DType::F32)),
            0.0);
}

TEST_F(WeightMapTest, ScopedViewsTakeRelativeNamesAndShareTheUsedRecord) {
  WeightMap w = dit();
  WeightMap b0 = w.scoped("blocks.").scoped("0.");
  EXPECT_EQ(b0.prefix(), "blocks.0.");
  EXPECT_EQ(b0.names(), (std::vector<std::string>{"to_k.bias", "to_k.weight", "to_q.weight"}));
  EXPECT_TRUE(b0.contains("to_q.weight"));
  EXPECT_TRUE(b0.take("to_q.weight", {4, 4}, DType::F32).defined());
  EXPECT_TRUE(b0.take("to_k.weight", {-1, 4}, DType::F32).defined());  // -1: any size
  b0.take("to_k.bias", {4}, DType::F32);
  EXPECT_NO_THROW(b0.finish("block 0"));
  // The root sees what the scope used; only the rest is unexpected.
  EXPECT_EQ(w.unused(),
            (std::vector<std::string>{"blocks.1.to_q.weight", "ids", "proj_out.weight"}));
  w.take("blocks.1.to_q.weight", {4, 4}, DType::F32);
  w.take("proj_out.weight", {4, 4}, DType::F32);
  w.take("ids", {3}, DType::I64);
  EXPECT_NO_THROW(w.finish("transformer"));
}

TEST_F(WeightMapTest, FinishReportsEveryProblemInOneError) {
  WeightMap w = dit();
  EXPECT_FALSE(w.take("blocks.0.to_v.weight", {4, 4}, DType::F32).defined());  // missing
  EXPECT_FALSE(w.take("blocks.0.to_q.weight", {4, 5}, DType::F32).defined());  // shape
  EXPECT_FALSE(w.take("blocks.0.to_k.bias", {4, 1}, DType::F32).defined());    // rank
  EXPECT_FALSE(w.take("ids", {3}, DType::F32).defined());                      // int -> float
  EXPECT_FALSE(w.take("proj_out.weight", {4, 4}, DType::U8).defined());        // float -> int
  w.take("missing.too", {1}, DType::F32);
  expect_error_containing(
      [&] { w.finish("transformer"); },
      {"transformer:", path, "strip 'model.diffusion_model.'",
       "2 missing: blocks.0.to_v.weight, missing.too", "2 with the wrong shape",
       "blocks.0.to_q.weight (expected [4, 5], file has [4, 4])",
       "blocks.0.to_k.bias (expected [4, 1], file has [4])", "2 with an unusable dtype",
       "ids (file has i64, model wants f32)", "proj_out.weight (file has f32, model wants u8)",
       "2 unexpected: blocks.0.to_k.weight, blocks.1.to_q.weight"});
}

TEST_F(WeightMapTest, FinishOnAScopeOnlyReportsThatScope) {
  WeightMap w = dit();
  WeightMap b1 = w.scoped("blocks.1.");
  b1.take("to_q.weight", {4, 4}, DType::F32);
  EXPECT_NO_THROW(b1.finish("block 1"));
  w.take("blocks.0.nothing", {1}, DType::F32);
  EXPECT_NO_THROW(b1.finish("block 1"));
  expect_error_containing(
      [&] { w.scoped("blocks.0.").finish("block 0"); },
      {"block 0", "under 'blocks.0.'", "1 missing: blocks.0.nothing", "3 unexpected"});
}

TEST_F(WeightMapTest, OptionalTensorsMayBeAbsentButNotMisshaped) {
  WeightMap w = dit().scoped("blocks.0.");
  EXPECT_EQ(w.take_optional("to_gate_logits.weight", {2, 4}, DType::F32), std::nullopt);
  const auto present = w.take_optional("to_q.weight", {4, 4}, DType::F32);
  ASSERT_TRUE(present.has_value());
  EXPECT_EQ(test::max_abs_diff(*present, q), 0.0);
  EXPECT_EQ(w.take_optional("to_k.weight", {8, 4}, DType::F32), std::nullopt);
  w.take("to_k.bias", {4}, DType::F32);
  expect_error_containing([&] { w.finish("block"); },
                          {"1 with the wrong shape: blocks.0.to_k.weight (expected [8, 4]"});
  try {
    w.finish("block");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("to_gate_logits"), std::string::npos) << e.what();
  }
}

TEST_F(WeightMapTest, CapsTheListedNamesAndCountsTheRest) {
  TempDir d2;
  std::vector<std::pair<std::string, Tensor>> many;
  for (int i = 0; i < 25; ++i) many.emplace_back(str("w", 100 + i), Tensor::zeros({1}));
  const std::string p = d2.file("many.safetensors");
  write_safetensors(p, many);
  WeightMap w = WeightMap::open({p});
  for (int i = 0; i < 13; ++i) w.take(str("x", 100 + i), {1}, DType::F32);
  expect_error_containing([&] { w.finish("m"); }, {"13 missing: x100, x101", "x109 and 3 more",
                                                   "25 unexpected: w100", "w109 and 15 more"});
}

TEST_F(WeightMapTest, IgnoredNamesAreNotUnexpected) {
  WeightMap w = dit();
  w.ignore("blocks.");  // a prefix
  w.ignore("ids");      // an exact name
  w.ignore("not.there");
  EXPECT_EQ(w.unused(), std::vector<std::string>{"proj_out.weight"});
  w.take_any_shape("proj_out.weight", DType::F32);
  EXPECT_NO_THROW(w.finish("transformer"));
}

TEST_F(WeightMapTest, LaterFilesWinAndTensorsOutliveTheMap) {
  const std::string p2 = dir.file("override.safetensors");
  const Tensor other = test::random_tensor({4, 4}, 9);
  write_safetensors(p2, {{"model.diffusion_model.proj_out.weight", other}});
  Tensor t;
  {
    WeightMap w = WeightMap::open({path, p2}, KeyMap::strip_prefix("model.diffusion_model."));
    t = w.take("proj_out.weight", {4, 4}, DType::F32);
    w.ignore("");
    w.take("blocks.9.x", {1}, DType::F32);
    expect_error_containing([&] { w.finish("merged"); },
                            {"model.safetensors", "override.safetensors"});
  }
  EXPECT_EQ(test::max_abs_diff(t, other), 0.0);
}

TEST_F(WeightMapTest, AddedTensorsAreTakenLikeFileTensors) {
  WeightMap w;
  w.scoped("attn.").add("to_q.weight", q);
  EXPECT_TRUE(w.contains("attn.to_q.weight"));
  EXPECT_EQ(w.dtype("attn.to_q.weight"), DType::F32);
  const Tensor t = w.take("attn.to_q.weight", {4, 4}, DType::BF16);
  EXPECT_EQ(t.dtype(), DType::BF16);
  EXPECT_NO_THROW(w.finish("added"));
  expect_error_containing([&] { w.add("u", Tensor()); }, {"'u'", "undefined"});
  w.add("late", bias);
  expect_error_containing([&] { w.finish("added"); }, {"no files", "1 unexpected: late"});
}

TEST_F(WeightMapTest, SynthesisCreatesWhatTheLoaderTakesAndNothingElse) {
  std::vector<std::string> asked;
  io::WeightSynthesis synth([&](const std::string& name, const Shape& shape) {
    asked.push_back(name + " " + shape.str());
    return Tensor::full(shape, 0.5, DType::BF16);
  });
  WeightMap w = dit();  // file tensors are taken from the file, absent ones created
  WeightMap blk = w.scoped("blocks.0.");
  const Tensor q_taken = blk.take("to_q.weight", {4, 4}, DType::F32);
  const Tensor made = blk.take("to_v.weight", {3, 4}, DType::F32);
  EXPECT_EQ(test::max_abs_diff(q_taken, q), 0.0);
  ASSERT_TRUE(made.defined());
  EXPECT_EQ(made.dtype(), DType::F32);  // converted like a file tensor
  EXPECT_EQ(made.shape(), Shape({3, 4}));
  EXPECT_EQ(made.to_float_vector()[0], 0.5f);
  // Optional names, unknown sizes and take_any_shape are never invented.
  EXPECT_FALSE(w.take_optional("maybe", {2}, DType::F32).has_value());
  EXPECT_FALSE(w.take("wild", {-1, 4}, DType::F32).defined());
  EXPECT_FALSE(w.take_any_shape("any", DType::F32).defined());
  // A second take of a created name returns the same tensor without asking again.
  EXPECT_EQ(test::max_abs_diff(blk.take("to_v.weight", {3, 4}, DType::F32), made), 0.0);
  EXPECT_EQ(asked, (std::vector<std::string>{"blocks.0.to_v.weight [3, 4]"}));
  ASSERT_EQ(synth.created().size(), 1u);
  EXPECT_EQ(synth.created()[0].first, "blocks.0.to_v.weight");
  EXPECT_EQ(synth.created()[0].second.dtype(), DType::BF16);
  expect_error_containing([&] { w.finish("synth"); }, {"2 missing: any, wild"});
  // Scopes do not nest; a maker must honour the shape.
  expect_error_containing([&] { io::WeightSynthesis inner([](auto&, auto&) { return Tensor(); }); },
                          {"do not nest"});
}

TEST_F(WeightMapTest, SynthesisEndsWithItsScopeAndChecksTheMaker) {
  {
    io::WeightSynthesis synth([](const std::string&, const Shape&) { return Tensor::zeros({1}); });
    WeightMap w;
    expect_error_containing([&] { w.take("x", {2, 2}, DType::F32); },
                            {"WeightSynthesis", "'x'", "[2, 2]"});
  }
  WeightMap w;
  EXPECT_FALSE(w.take("x", {2, 2}, DType::F32).defined());  // no scope: missing, as always
  expect_error_containing([&] { w.finish("after"); }, {"1 missing: x"});
}

TEST(WeightMap, SyntheticMakesEachRequiredTensorOnceWithTheRequestedLayout) {
  std::vector<std::string> made;
  WeightMap w = WeightMap::synthetic([&](const std::string& name, const Shape& shape, DType dtype,
                                         Device device) {
    made.push_back(name);
    return Tensor::full(shape, static_cast<double>(made.size()), dtype, device);
  });
  WeightMap blk = w.scoped("blocks.0.");
  const Tensor a = blk.take("proj.weight", {3, 2}, DType::BF16);
  EXPECT_EQ(a.shape(), Shape({3, 2}));
  EXPECT_EQ(a.dtype(), DType::BF16);
  EXPECT_EQ(a.to_float_vector(), std::vector<float>(6, 1.f));
  // The same name again is the same tensor, not a second one.
  const Tensor again = blk.take("proj.weight", {3, 2}, DType::BF16);
  EXPECT_EQ(again.raw_data(), a.raw_data());
  EXPECT_EQ(made, std::vector<std::string>({"blocks.0.proj.weight"}));
  // Optional names stay absent; names without a fixed shape cannot be made.
  EXPECT_FALSE(w.take_optional("extra", {4}, DType::F32).has_value());
  EXPECT_FALSE(w.take("free", {-1, 2}, DType::F32).defined());
  EXPECT_FALSE(w.take_any_shape("scalar", DType::F32).defined());
  EXPECT_EQ(made.size(), 1u);
  expect_error_containing([&] { w.finish("model"); }, {"2 missing", "free", "scalar"});
}

TEST(WeightMap, SyntheticRejectsAMisshapedTensorFromItsFunction) {
  WeightMap w = WeightMap::synthetic([](const std::string&, const Shape&, DType dtype, Device device) {
    return Tensor::zeros({1}, dtype, device);
  });
  expect_error_containing([&] { (void)w.take("x", {2, 2}, DType::F32); },
                          {"synthesizer", "'x'", "[2, 2]"});
  expect_error_containing([] { (void)WeightMap::synthetic(nullptr); }, {"no synthesizer"});
}

}  // namespace
}  // namespace ltx
