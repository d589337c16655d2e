// Configuration of the text embeddings processor from a checkpoint's config.transformer: the
// connector keys and their code defaults, the audio fallbacks, the V1 / V2 feature-extractor
// selection and the reference's NotImplementedError cases, and the stricter checks.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/text/embeddings_processor.h"
#include "support/test_support.h"

namespace ltx::connector_config_test {
namespace {

namespace txt = models::text;
using json = nlohmann::json;
using txt::EmbeddingsProcessorConfig;
using txt::FeatureExtractorVersion;
using models::transformer::LTXRopeType;

json metadata_of(const std::string& fixture) {
  return io::SafetensorsFile(test::fixture(fixture)).metadata_json();
}

// The 2.3 fixture's config (V2, gated connectors, 2 x 32 video / 2 x 16 audio).
json ltx23() { return metadata_of("ltx23.weights.safetensors"); }
const txt::GemmaTextDims kDims{48, 3};

EmbeddingsProcessorConfig parse(const json& md, txt::GemmaTextDims dims = kDims) {
  return EmbeddingsProcessorConfig::from_metadata(md, dims, "ckpt.safetensors");
}

// Parsing must throw an ltx::Error whose message contains every `parts`.
void expect_error(const json& md, std::initializer_list<const char*> parts,
                  txt::GemmaTextDims dims = kDims) {
  try {
    (void)parse(md, dims);
    ADD_FAILURE() << "no error for " << md["config"]["transformer"].dump();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    EXPECT_NE(msg.find("ckpt.safetensors"), std::string::npos) << msg;
  }
}

TEST(ConnectorConfig, V1WhenNoTextProjectionKeys) {
  const EmbeddingsProcessorConfig c = parse(metadata_of("ltx2.weights.safetensors"));
  EXPECT_EQ(c.feature_extractor.version, FeatureExtractorVersion::V1);
  EXPECT_EQ(c.feature_extractor.embedding_dim, 48);
  EXPECT_EQ(c.feature_extractor.num_layers, 4);
  EXPECT_EQ(c.feature_extractor.video_dim, 48);
  EXPECT_EQ(c.feature_extractor.audio_dim, 48);
  EXPECT_EQ(c.video_connector.num_attention_heads, 2);
  EXPECT_EQ(c.video_connector.attention_head_dim, 24);
  // No audio_connector_* keys: the audio connector takes the video connector's shape.
  EXPECT_EQ(c.audio_connector.inner_dim(), 48);
  EXPECT_EQ(c.video_connector.num_layers, 2);
  EXPECT_EQ(c.video_connector.positional_embedding_max_pos, std::vector<double>{4096});
  EXPECT_FALSE(c.video_connector.apply_gated_attention);
  EXPECT_TRUE(c.video_connector.ff_bias);
  EXPECT_TRUE(c.video_connector.double_precision_rope);
  EXPECT_EQ(c.video_connector.num_learnable_registers, 128);
}

TEST(ConnectorConfig, V2WithExactSelectionValues) {
  const EmbeddingsProcessorConfig c = parse(ltx23());
  EXPECT_EQ(c.feature_extractor.version, FeatureExtractorVersion::V2);
  EXPECT_EQ(c.feature_extractor.video_dim, 64);
  EXPECT_EQ(c.feature_extractor.audio_dim, 32);
  EXPECT_EQ(c.feature_extractor.flat_dim(), 48 * 4);
  EXPECT_EQ(c.audio_connector.num_attention_heads, 2);
  EXPECT_EQ(c.audio_connector.attention_head_dim, 16);
  EXPECT_TRUE(c.video_connector.apply_gated_attention);
  EXPECT_TRUE(c.audio_connector.apply_gated_attention);
}

TEST(ConnectorConfig, CodeDefaultsForAbsentKeys) {
  // Every connector key absent: 30 x 128 heads, 2 layers, max_pos [1], split RoPE in f32,
  // no gate, FF biases; V1 at the Gemma width (3840 = 30 x 128, the 19B numbers).
  const json md = {{"config", {{"transformer", json::object()}}}};
  const EmbeddingsProcessorConfig c = parse(md, {3840, 48});
  for (const auto* k : {&c.video_connector, &c.audio_connector}) {
    EXPECT_EQ(k->num_attention_heads, 30);
    EXPECT_EQ(k->attention_head_dim, 128);
    EXPECT_EQ(k->num_layers, 2);
    EXPECT_EQ(k->positional_embedding_max_pos, std::vector<double>{1});
    EXPECT_EQ(k->positional_embedding_theta, 10000.0);
    EXPECT_EQ(k->rope_type, LTXRopeType::Split);
    EXPECT_FALSE(k->double_precision_rope);
    EXPECT_FALSE(k->apply_gated_attention);
    EXPECT_TRUE(k->ff_bias);
  }
  EXPECT_EQ(c.feature_extractor.version, FeatureExtractorVersion::V1);
  EXPECT_EQ(c.feature_extractor.flat_dim(), 3840 * 49);
}

TEST(ConnectorConfig, AudioKeysOverrideAndFallBackIndividually) {
  json md = ltx23();
  auto& t = md["config"]["transformer"];
  t.erase("audio_connector_attention_head_dim");  // falls back to connector_attention_head_dim (32)
  t["audio_connector_num_layers"] = 3;
  t["audio_num_attention_heads"] = 2;
  t["audio_attention_head_dim"] = 32;  // V2 audio features 64 wide, as the fallback connector
  const EmbeddingsProcessorConfig c = parse(md);
  EXPECT_EQ(c.audio_connector.attention_head_dim, 32);
  EXPECT_EQ(c.audio_connector.num_layers, 3);
  EXPECT_EQ(c.video_connector.num_layers, 2);
}

TEST(ConnectorConfig, PartialV2ConfigIsRefused) {
  json md = ltx23();
  md["config"]["transformer"].erase("caption_proj_input_norm");
  md["config"]["transformer"].erase("caption_projection_second_linear");
  expect_error(md, {"partial", "caption_proj_input_norm", "caption_projection_second_linear",
                    "NotImplementedError"});
  // Only one V2 key present is partial too (it is not V1).
  json one = metadata_of("ltx2.weights.safetensors");
  one["config"]["transformer"]["caption_proj_before_connector"] = true;
  expect_error(one, {"partial", "caption_projection_first_linear"});
}

TEST(ConnectorConfig, UnknownV2ValuesAreRefused) {
  json md = ltx23();
  md["config"]["transformer"]["caption_projection_first_linear"] = true;
  expect_error(md, {"caption_projection_first_linear=true", "expected false", "NotImplementedError"});
  md = ltx23();
  md["config"]["transformer"]["caption_proj_before_connector"] = false;
  expect_error(md, {"caption_proj_before_connector=false"});
  // Python equality: 0 == False is accepted, as in the reference.
  md = ltx23();
  md["config"]["transformer"]["caption_proj_input_norm"] = 0;
  EXPECT_EQ(parse(md).feature_extractor.version, FeatureExtractorVersion::V2);
}

TEST(ConnectorConfig, V2NeedsTheProjectionWidths) {
  json md = ltx23();
  md["config"]["transformer"].erase("audio_attention_head_dim");
  expect_error(md, {"audio_attention_head_dim", "V2"});
}

TEST(ConnectorConfig, StrictChecks) {
  json md = ltx23();
  md["config"]["transformer"]["connector_rope_scaling"] = 2;
  expect_error(md, {"config.transformer.connector_rope_scaling", "not a connector key"});

  md = ltx23();
  md["config"]["transformer"]["connector_num_layers"] = "2";
  expect_error(md, {"connector_num_layers", "integer"});

  md = ltx23();
  md["config"]["transformer"]["connector_positional_embedding_max_pos"] = {4096, 4096};
  expect_error(md, {"connector_positional_embedding_max_pos", "exactly one"});

  md = ltx23();
  md["config"]["transformer"]["connector_attention_head_dim"] = 16;  // 32 wide vs 64-wide features
  expect_error(md, {"connector_num_attention_heads", "64"});

  md = ltx23();
  md["config"]["transformer"]["audio_connector_attention_head_dim"] = 8;
  expect_error(md, {"audio_connector_num_attention_heads", "32"});

  md = ltx23();
  md["config"]["transformer"]["text_encoder_norm_type"] = "layer_norm";
  expect_error(md, {"text_encoder_norm_type", "per_token_rms"});
  md["config"]["transformer"]["text_encoder_norm_type"] = "PER_TOKEN_RMS";  // the 2.5 spelling
  EXPECT_NO_THROW(parse(md));

  md = ltx23();
  md["config"]["transformer"]["frequencies_precision"] = "float16";
  expect_error(md, {"frequencies_precision"});

  // V1 features are the Gemma width: a connector of another width cannot take them.
  expect_error(metadata_of("ltx2.weights.safetensors"), {"connector_num_attention_heads", "Gemma hidden size"},
               {64, 3});

  EXPECT_THROW(parse(json{{"model_version", "2.3.0"}}), Error);
}

}  // namespace
}  // namespace ltx::connector_config_test
