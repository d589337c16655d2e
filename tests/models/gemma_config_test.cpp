// Gemma configs (as the golden io files' `gemma_config_resolved` records HF resolving them), the
// defaults and refusals, and the text-encoder / LTX-checkpoint version check.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "models/gemma_support.h"
#include "models/text/gemma/compat.h"
#include "models/text/gemma/config.h"

namespace ltx::gemma_config_test {
namespace {

using nlohmann::json;
using test::TempDir;
using text::GemmaLayerType;
using text::GemmaTextConfig;

GemmaTextConfig config_of(const std::string& fixture_name) {
  const text::GemmaAssets a = text::GemmaAssets::load(test::fixture(fixture_name));
  return GemmaTextConfig::from_json(a.config, a.source);
}

void expect_resolved_like_hf(const GemmaTextConfig& c, const std::string& io_case) {
  const json r = test::text_io(io_case).metadata_json("gemma_config_resolved");
  ASSERT_EQ(c.layers.size(), r["layer_types"].size());
  for (size_t i = 0; i < c.layers.size(); ++i)
    EXPECT_EQ(text::gemma_layer_type_name(c.layers[i].type), r["layer_types"][i]) << i;
  EXPECT_EQ(c.sliding_window, r["sliding_window"].get<int64_t>());
  for (const auto t : {GemmaLayerType::Sliding, GemmaLayerType::Full}) {
    const json& p = r["rope_parameters"][text::gemma_layer_type_name(t)];
    EXPECT_EQ(c.rope(t).rope_type, p["rope_type"].get<std::string>());
    EXPECT_EQ(c.rope(t).theta, p["rope_theta"].get<double>());
    EXPECT_EQ(c.rope(t).factor, p.value("factor", 1.0));
    EXPECT_EQ(c.rope(t).partial_rotary_factor, p.value("partial_rotary_factor", 1.0));
  }
}

TEST(GemmaConfig, Gemma3ResolvesLayerTypesAndRopeFromTheLegacyKeys) {
  const GemmaTextConfig c = config_of("text_gemma3.te.safetensors");
  expect_resolved_like_hf(c, "ltx23");
  EXPECT_EQ(c.family, text::GemmaFamily::Gemma3);
  EXPECT_TRUE(c.norm_adds_one);
  EXPECT_FALSE(c.v_norm);
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / std::sqrt(20.0));  // query_pre_attn_scalar 20
  EXPECT_EQ(c.layers[0].head_dim, 16);
  EXPECT_EQ(c.layers[0].num_kv_heads, 2);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 9}));
  EXPECT_FALSE(c.gemma_version.has_value());
  EXPECT_TRUE(c.replaced_token_ids.empty());  // the image token lies inside the vocabulary
}

TEST(GemmaConfig, Gemma4UnifiedHasGlobalHeadsKAsVAndProportionalRope) {
  const GemmaTextConfig c = config_of("text_gemma4.te.safetensors");
  expect_resolved_like_hf(c, "ltx25");
  EXPECT_EQ(c.family, text::GemmaFamily::Gemma4Unified);
  EXPECT_EQ(c.attention_scale, 1.0);
  EXPECT_TRUE(c.v_norm && c.layer_scalar && !c.norm_adds_one);
  EXPECT_EQ(c.layers[0].head_dim, 8);
  EXPECT_EQ(c.layers[0].num_kv_heads, 2);
  EXPECT_FALSE(c.layers[0].k_eq_v);
  EXPECT_EQ(c.layers[5].head_dim, 16);
  EXPECT_EQ(c.layers[5].num_kv_heads, 1);
  EXPECT_TRUE(c.layers[5].k_eq_v);
  EXPECT_EQ(c.final_logit_softcapping, 30.0);
  EXPECT_EQ(c.gemma_version, "gemma4-12b-ltx-v1");
  EXPECT_EQ(c.replaced_token_ids, (std::vector<int64_t>{14, 18, 17}));
  const std::vector<float> inv = text::gemma_rope_inv_freq(c.rope_full, 16);
  ASSERT_EQ(inv.size(), 8u);  // head_dim / 2, zeros past the rotated quarter
  EXPECT_GT(inv[1], 0.0f);
  for (size_t i = 2; i < 8; ++i) EXPECT_EQ(inv[i], 0.0f);
}

json minimal(const std::string& model_type) {
  return {{"model_type", model_type},
          {"text_config",
           {{"hidden_size", 8},
            {"num_hidden_layers", 7},
            {"vocab_size", 10},
            {"num_attention_heads", 2},
            {"num_key_value_heads", 1},
            {"head_dim", 4}}}};
}

TEST(GemmaConfig, DefaultsFollowTheHfConfigClasses) {
  const GemmaTextConfig g3 = GemmaTextConfig::from_json(minimal("gemma3"), "t");
  EXPECT_EQ(g3.sliding_window, 4096);
  EXPECT_DOUBLE_EQ(g3.attention_scale, 1.0 / 16.0);  // query_pre_attn_scalar 256
  EXPECT_EQ(g3.rope_full.theta, 1e6);
  EXPECT_EQ(g3.rope_full.rope_type, "default");
  EXPECT_EQ(g3.rope_sliding.theta, 1e4);
  EXPECT_EQ(g3.layers[5].type, GemmaLayerType::Full);  // pattern 6
  EXPECT_EQ(g3.layers[6].type, GemmaLayerType::Sliding);
  EXPECT_EQ(g3.eos_token_ids, (std::vector<int64_t>{1}));

  const GemmaTextConfig g4 = GemmaTextConfig::from_json(minimal("gemma4_unified"), "t");
  EXPECT_EQ(g4.layers[6].type, GemmaLayerType::Full);  // the last layer is forced global
  EXPECT_EQ(g4.layers[5].head_dim, 512);               // global_head_dim default
  EXPECT_EQ(g4.sliding_window, 1024);
  EXPECT_EQ(g4.rope_full.rope_type, "proportional");
  EXPECT_EQ(g4.rope_full.partial_rotary_factor, 0.25);
  EXPECT_EQ(g4.hidden_size_per_layer_input, 0);

  const GemmaTextConfig dense = GemmaTextConfig::from_json(minimal("gemma4"), "t");
  EXPECT_EQ(dense.sliding_window, 512);
  EXPECT_EQ(dense.hidden_size_per_layer_input, 256);  // per-layer inputs on by default
}

TEST(GemmaConfig, KvSharingPicksTheLastEarlierLayerOfTheSameType) {
  json j = minimal("gemma4");
  j["text_config"]["num_hidden_layers"] = 6;
  j["text_config"]["layer_types"] = {"sliding_attention", "full_attention",    "sliding_attention",
                                     "full_attention",    "sliding_attention", "full_attention"};
  j["text_config"]["num_kv_shared_layers"] = 2;
  j["text_config"]["use_double_wide_mlp"] = true;
  j["text_config"]["intermediate_size"] = 16;
  const GemmaTextConfig c = GemmaTextConfig::from_json(j, "t");
  EXPECT_EQ(c.layers[3].kv_source, -1);
  EXPECT_EQ(c.layers[4].kv_source, 2);
  EXPECT_EQ(c.layers[5].kv_source, 3);
  EXPECT_EQ(c.layers[3].intermediate_size, 16);
  EXPECT_EQ(c.layers[4].intermediate_size, 32);
  j["text_config"]["layer_types"][1] = "sliding_attention";
  j["text_config"]["layer_types"][3] = "sliding_attention";
  EXPECT_THROW(GemmaTextConfig::from_json(j, "t"), Error);  // no earlier full layer to share
}

void expect_refused(json j, const std::string& needle) {
  try {
    GemmaTextConfig::from_json(j, "cfg.json");
    FAIL() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cfg.json"), std::string::npos) << e.what();
  }
}

TEST(GemmaConfig, RefusesWhatTheDecoderDoesNotImplement) {
  expect_refused(json{{"model_type", "llama"}}, "model_type");
  expect_refused(json::object(), "model_type");
  json j = minimal("gemma4");
  j["text_config"]["enable_moe_block"] = true;
  expect_refused(j, "enable_moe_block");
  j = minimal("gemma4_unified");
  j["text_config"]["use_bidirectional_attention"] = "all";
  expect_refused(j, "use_bidirectional_attention");
  j = minimal("gemma3");
  j["text_config"]["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  expect_refused(j, "yarn");
  j = minimal("gemma3");
  j["text_config"]["layer_types"] = {"sliding_attention"};
  expect_refused(j, "layer_types");
  j = minimal("gemma3");
  j["text_config"]["hidden_size"] = "big";
  expect_refused(j, "hidden_size");
  j = minimal("gemma3");
  j["text_config"]["hidden_activation"] = "swish";
  expect_refused(j, "hidden_activation");
  j = minimal("gemma3");
  j["text_config"]["num_key_value_heads"] = 3;
  expect_refused(j, "key/value heads");
}

// ---- version check ----

const std::string kGemma3 = "text_gemma3.te.safetensors";
const std::string kGemma4 = "text_gemma4.te.safetensors";
const std::string kLtx23 = "text_ltx23.ckpt.safetensors";
const std::string kLtx25 = "text_ltx25.transformer.safetensors";

void expect_check_fails(const std::string& ltx, const std::string& gemma,
                        const std::vector<std::string>& needles) {
  try {
    text::check_gemma_version(test::fixture(ltx), config_of(gemma), test::fixture(gemma));
    FAIL() << "expected a version error for " << ltx << " + " << gemma;
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << "\n" << e.what();
  }
}

TEST(GemmaVersionCheck, AcceptsTheMatchingPairs) {
  EXPECT_TRUE(
      text::check_gemma_version(test::fixture(kLtx25), config_of(kGemma4), test::fixture(kGemma4))
          .warnings.empty());
  EXPECT_TRUE(
      text::check_gemma_version(test::fixture(kLtx23), config_of(kGemma3), test::fixture(kGemma3))
          .warnings.empty());
}

TEST(GemmaVersionCheck, RefusesMismatchesNamingBothFiles) {
  // LTX-2.5 expects gemma4-12b-ltx-v1; the Gemma 3 file has no gemma_version.
  expect_check_fails(kLtx25, kGemma3, {kLtx25, kGemma3, "gemma4-12b-ltx-v1", "none"});
  // LTX-2.3 has no gemma_source_checkpoint: it needs a Gemma 3 text encoder.
  expect_check_fails(kLtx23, kGemma4, {kLtx23, kGemma4, "gemma3", "gemma4_unified"});
}

TEST(GemmaVersionCheck, FollowsTheReferenceRulesForEachMetadataCase) {
  const GemmaTextConfig g4 = config_of(kGemma4);
  GemmaTextConfig g4_unversioned = g4;
  g4_unversioned.gemma_version.reset();
  const auto check = [](const json& meta, const GemmaTextConfig& g) {
    return text::check_gemma_version(meta, "ltx.safetensors", g, "te.safetensors");
  };
  // A different stamped version.
  EXPECT_THROW(check({{"gemma_source_checkpoint", {{"gemma_version", "gemma4-12b-ltx-v2"}}}}, g4),
               Error);
  // model_version >= 2.4 must declare gemma_source_checkpoint ...
  EXPECT_THROW(check({{"model_version", "2.5.0"}}, g4), Error);
  EXPECT_THROW(check({{"model_version", "2.4"}}, g4), Error);
  // ... unless neither side has a version: a warning.
  const auto w = check({{"model_version", "2.5.0"}}, g4_unversioned).warnings;
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("not checked"), std::string::npos);
  // Pre-2.4 tags ("2.4-rc2" parses to (2,)) and no version fall back to the Gemma 3 rule.
  EXPECT_THROW(check({{"model_version", "2.4-rc2"}}, g4), Error);
  EXPECT_THROW(check(json::object(), g4), Error);
  EXPECT_TRUE(check({{"model_version", "2.3.0"}}, config_of(kGemma3)).warnings.empty());
}

}  // namespace
}  // namespace ltx::gemma_config_test
