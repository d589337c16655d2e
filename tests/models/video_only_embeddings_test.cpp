// Video-only checkpoints (no audio connector): the reference's VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_OPS,
// detection from the connector keys, and video contexts equal to the audio-video checkpoint's
// (the video path does not depend on the audio one) with no audio context, for V1 (LTX-2 layout)
// and V2 (LTX-2.3 layout, through the PromptEncoder).
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/io_test_util.h"
#include "io/safetensors.h"
#include "models/gemma_support.h"
#include "models/text/embeddings_processor.h"
#include "models/text/prompt_encoder.h"
#include "support/test_support.h"

namespace ltx {
namespace {

namespace txt = models::text;
using json = nlohmann::json;

const std::string kVideo = "model.diffusion_model.video_embeddings_connector.";
const std::string kAudio = "model.diffusion_model.audio_embeddings_connector.";
const std::string kVideoOnly = "model.diffusion_model.embeddings_connector.";

// A video-only copy of an audio-video fixture: the video connector under the video-only name,
// no audio connector and no audio projection; `drop_keys` removed from config.transformer.
std::string video_only_copy(const test::TempDir& dir, const std::string& fixture,
                            const std::vector<std::string>& drop_keys = {}) {
  const std::string dst = dir.file("video_only_" + fixture);
  test::rewrite_safetensors(
      test::fixture(fixture), dst,
      [](const std::string& n) -> std::string {
        if (n.starts_with(kAudio) || n.starts_with("text_embedding_projection.audio_")) return "";
        if (n.starts_with(kVideo)) return kVideoOnly + n.substr(kVideo.size());
        return n;
      },
      [&](std::map<std::string, std::string>& meta) {
        json config = json::parse(meta.at("config"));
        for (const auto& k : drop_keys) config["transformer"].erase(k);
        meta["config"] = config.dump();
      });
  return dst;
}

TEST(VideoOnlyEmbeddings, KeyMapIsTheReferencesVideoOnlyMap) {
  const io::KeyMap v = txt::embeddings_processor_key_map(false);
  EXPECT_EQ(v.apply("text_embedding_projection.aggregate_embed.weight"),
            "feature_extractor.aggregate_embed.weight");
  EXPECT_EQ(v.apply("text_embedding_projection.video_aggregate_embed.bias"),
            "feature_extractor.video_aggregate_embed.bias");
  EXPECT_EQ(v.apply(kVideoOnly + "learnable_registers"), "video_connector.learnable_registers");
  for (const std::string& k :
       std::vector<std::string>{"text_embedding_projection.audio_aggregate_embed.weight",
                                kAudio + "learnable_registers", kVideo + "learnable_registers"})
    EXPECT_EQ(v.apply(k), std::nullopt) << k;
  // The audio-video map does not read the video-only connector name.
  const io::KeyMap av = txt::embeddings_processor_key_map();
  EXPECT_EQ(av.apply(kVideoOnly + "learnable_registers"), std::nullopt);
  EXPECT_EQ(av.apply(kAudio + "learnable_registers"), "audio_connector.learnable_registers");
}

TEST(VideoOnlyEmbeddings, LayoutComesFromTheConnectorKeys) {
  test::TempDir dir;
  const auto open = [](const std::string& p) { return io::SafetensorsFile::open(p); };
  EXPECT_TRUE(txt::embeddings_have_audio({open(test::fixture("ltx23.weights.safetensors"))}));
  // No connector at all (a text-projection file): audio-video, binding reports what is missing.
  EXPECT_TRUE(txt::embeddings_have_audio({open(test::fixture("ltx25.text_proj.weights.safetensors"))}));
  const std::string vo = video_only_copy(dir, "ltx23.weights.safetensors");
  EXPECT_FALSE(txt::embeddings_have_audio({open(vo)}));
  // Any file with an audio connector makes it audio-video.
  EXPECT_TRUE(txt::embeddings_have_audio({open(vo), open(test::fixture("ltx23.weights.safetensors"))}));
}

TEST(VideoOnlyEmbeddings, V1CheckpointGivesTheSameVideoContextAndNoAudio) {
  test::TempDir dir;
  const io::SafetensorsFile io(test::fixture("ltx2.textproc.io.safetensors"));
  const Tensor hidden = io.tensor("in.hidden_states"), mask = io.tensor("in.attention_mask");
  const txt::GemmaTextDims dims{hidden.size(2), hidden.size(3) - 1};
  const auto proc = txt::EmbeddingsProcessor::from_files(
      {video_only_copy(dir, "ltx2.weights.safetensors")}, dims);
  EXPECT_FALSE(proc.has_audio());
  EXPECT_FALSE(proc.config().audio);
  EXPECT_EQ(proc.config().feature_extractor.audio_dim, 0);
  EXPECT_ERROR_HAS(proc.audio_connector(), "video-only");
  const txt::TextFeatures f = proc.features(hidden, mask);
  EXPECT_FALSE(f.audio.defined());
  EXPECT_LE(test::rel_l2_same_size(f.video, io.tensor("out.features.video")), 1e-5);
  const txt::EmbeddingsProcessorOutput o = proc.process_hidden_states(hidden, mask);
  EXPECT_FALSE(o.audio_encoding.defined());
  EXPECT_LE(test::rel_l2_same_size(o.video_encoding, io.tensor("out.video_encoding")), 1e-5);
  EXPECT_EQ(o.attention_mask.to_int_vector(), io.tensor("out.encoding_mask").to_int_vector());
  // Audio features for a processor without an audio connector, and the reverse, are refused.
  const Tensor additive = Tensor::zeros({2, 1, 1, 128});
  EXPECT_ERROR_HAS(proc.create_embeddings(f.video, f.video, additive), "no audio connector");
  const auto av = txt::EmbeddingsProcessor::from_files({test::fixture("ltx2.weights.safetensors")}, dims);
  EXPECT_ERROR_HAS(av.create_embeddings(f.video, Tensor(), additive), "no audio features");
}

TEST(VideoOnlyEmbeddings, V2CheckpointThroughThePromptEncoderGivesOnlyTheVideoContext) {
  test::TempDir dir;
  // The audio widths are not read for a video-only V2 projection.
  const std::string vo = video_only_copy(dir, "text_ltx23.ckpt.safetensors",
                                         {"audio_num_attention_heads", "audio_attention_head_dim"});
  text::PromptEncoder enc(test::fixture("text_gemma3.te.safetensors"), {vo});
  EXPECT_FALSE(enc.has_audio());
  const io::SafetensorsFile& io = test::text_io("ltx23");
  const std::string empty_prompt = io.metadata_json("prompts")[2].get<std::string>();
  const std::vector<text::PromptContext> ctx = enc.encode({empty_prompt});
  ASSERT_EQ(ctx.size(), 1u);
  EXPECT_FALSE(ctx[0].audio.defined());
  EXPECT_LE(test::rel_l2_same_size(ctx[0].video, io.tensor("out.video_encoding").narrow(0, 2, 1)), 1e-5);
  EXPECT_EQ(ctx[0].mask.to_int_vector(),
            io.tensor("out.encoding_mask").narrow(0, 2, 1).to_int_vector());
}

}  // namespace
}  // namespace ltx
