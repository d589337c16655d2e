// The pipeline-facing PromptEncoder on the golden text cases (shared/golden/README-text.md):
// prompts -> contexts equal to the reference's PromptEncoder block (out.video_encoding /
// out.audio_encoding of text_ltx23.io / text_ltx25.io), the split-pack file rule, the model
// lifecycle, and the refusals.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io/weights.h"
#include "models/gemma_support.h"
#include "models/text/embeddings_processor.h"
#include "models/text/gemma/model.h"
#include "models/text/prompt_encoder.h"

namespace ltx {
namespace {

using text::PromptContext;
using text::PromptEncoder;
using text::PromptEncoderOptions;

std::vector<std::string> prompts_of(const io::SafetensorsFile& io) {
  std::vector<std::string> p;
  for (const auto& s : io.metadata_json("prompts")) p.push_back(s.get<std::string>());
  return p;
}

// ctx[k] against the reference contexts of prompt first + k.
void expect_reference_contexts(const std::vector<PromptContext>& ctx, const std::string& io_case,
                               int64_t first = 0) {
  const io::SafetensorsFile& io = test::text_io(io_case);
  ASSERT_EQ(static_cast<int64_t>(ctx.size()), 3 - first);
  for (int64_t i = first; i < 3; ++i) {
    const PromptContext& c = ctx[static_cast<size_t>(i - first)];
    EXPECT_EQ(c.video.shape(), (Shape{1, 1024, 32}));
    EXPECT_EQ(c.audio.shape(), (Shape{1, 1024, 16}));
    EXPECT_LE(test::rel_l2_same_size(c.video, io.tensor("out.video_encoding").narrow(0, i, 1)), 1e-5)
        << io_case << " prompt " << i;
    EXPECT_LE(test::rel_l2_same_size(c.audio, io.tensor("out.audio_encoding").narrow(0, i, 1)), 1e-5)
        << io_case << " prompt " << i;
    EXPECT_EQ(c.mask.to_int_vector(),
              io.tensor("out.encoding_mask").narrow(0, i, 1).to_int_vector());
  }
}

TEST(PromptEncoder, Gemma3WithTheLtx23CheckpointGivesTheReferenceContexts) {
  PromptEncoder enc(test::fixture("text_gemma3.te.safetensors"),
                    {test::fixture("text_ltx23.ckpt.safetensors")});
  // The monolith holds the projection: the text-encoder file is not added.
  EXPECT_EQ(enc.embeddings_paths().size(), 1u);
  EXPECT_TRUE(enc.has_audio());
  EXPECT_FALSE(enc.text_encoder_loaded());
  const std::vector<PromptContext> ctx = enc.encode(prompts_of(test::text_io("ltx23")));
  expect_reference_contexts(ctx, "ltx23");
  // The reference's lifecycle: nothing stays resident.
  EXPECT_FALSE(enc.text_encoder_loaded());
  EXPECT_FALSE(enc.embeddings_processor_loaded());
}

// Built from weight maps instead of files (how the pipeline benchmark builds it, with random
// weights): given the files' own tensors, the same contexts bit for bit, each model loaded once
// per encode() and freed after.
TEST(PromptEncoder, FromWeightMapsGivesTheContextsOfTheFiles) {
  const std::string te = test::fixture("text_gemma3.te.safetensors");
  const std::string ckpt = test::fixture("text_ltx23.ckpt.safetensors");
  PromptEncoder files(te, {ckpt});
  const text::GemmaTextConfig& g = files.gemma_config();
  const auto processor = models::text::EmbeddingsProcessorConfig::from_metadata(
      io::SafetensorsFile::open(ckpt)->metadata_json(),
      models::text::GemmaTextDims{g.hidden_size, g.num_layers}, ckpt);
  int gemma_loads = 0, processor_loads = 0;
  text::PromptEncoderWeights weights;
  weights.text_encoder = [&] {
    ++gemma_loads;
    return io::WeightMap::open({te}, io::KeyMap::strip_prefix("language_model.model."));
  };
  weights.embeddings_processor = [&] {
    ++processor_loads;
    return io::WeightMap::open({ckpt}, models::text::embeddings_processor_key_map());
  };
  PromptEncoder memory(text::GemmaAssets::load(te), processor, weights);
  EXPECT_TRUE(memory.has_audio());
  const std::vector<std::string> prompts = prompts_of(test::text_io("ltx23"));
  const std::vector<PromptContext> want = files.encode(prompts);
  const std::vector<PromptContext> got = memory.encode(prompts);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].video.to_float_vector(), want[i].video.to_float_vector()) << i;
    EXPECT_EQ(got[i].audio.to_float_vector(), want[i].audio.to_float_vector()) << i;
  }
  EXPECT_EQ(gemma_loads, 1);
  EXPECT_EQ(processor_loads, 1);
  EXPECT_FALSE(memory.text_encoder_loaded());
  EXPECT_FALSE(memory.embeddings_processor_loaded());
  const std::string e = test::error_of(
      [&] { PromptEncoder none(text::GemmaAssets::load(te), processor, {}); });
  EXPECT_NE(e.find("both weight sources"), std::string::npos) << e;
}

TEST(PromptEncoder, Gemma4SplitPackTakesTheProjectionFromTheTextEncoderFile) {
  const std::string te = test::fixture("text_gemma4.te.safetensors");
  PromptEncoderOptions o;
  o.keep_loaded = true;
  PromptEncoder enc(te, {test::fixture("text_ltx25.transformer.safetensors")}, o);
  ASSERT_EQ(enc.embeddings_paths().size(), 2u);
  EXPECT_EQ(enc.embeddings_paths()[1], te);
  // The two short prompts (keeps the test quick).
  const std::vector<std::string> p = prompts_of(test::text_io("ltx25"));
  const std::vector<PromptContext> ctx = enc.encode({p[1], p[2]});
  expect_reference_contexts(ctx, "ltx25", 1);
  EXPECT_TRUE(enc.text_encoder_loaded());
  EXPECT_TRUE(enc.embeddings_processor_loaded());
  enc.release();
  EXPECT_FALSE(enc.text_encoder_loaded());
  EXPECT_FALSE(enc.embeddings_processor_loaded());
}

TEST(PromptEncoder, StepsMatchEncodeAndTheReferenceTokens) {
  PromptEncoder enc(test::fixture("text_gemma3_root"),
                    {test::fixture("text_ltx23.ckpt.safetensors")});
  const io::SafetensorsFile& io = test::text_io("ltx23");
  const std::vector<std::string> prompts = prompts_of(io);
  // The empty prompt: BOS only, left padded.
  const text::TokenizedBatch b = enc.tokenize({prompts[2]});
  EXPECT_EQ(b.input_ids, io.tensor("in.input_ids").narrow(0, 2, 1).to_int_vector());
  EXPECT_EQ(b.attention_mask, io.tensor("in.attention_mask").narrow(0, 2, 1).to_int_vector());
  const Tensor mask = b.attention_mask_tensor();
  const PromptContext c = enc.contexts(enc.hidden_states(b.input_ids_tensor(), mask), mask);
  EXPECT_LE(test::rel_l2_same_size(c.video, io.tensor("out.video_encoding").narrow(0, 2, 1)), 1e-5);
  EXPECT_LE(test::rel_l2_same_size(c.audio, io.tensor("out.audio_encoding").narrow(0, 2, 1)), 1e-5);
  EXPECT_EQ(enc.encode({}).size(), 0u);
}

// The reference's enhance_first_prompt with a shared Gemma 3: enhance, then encode with the same
// loaded model.
TEST(PromptEncoder, EnhancesWithTheLoadedTextEncoderThenEncodes) {
  PromptEncoder enc(test::fixture("text_gemma3.te.safetensors"),
                    {test::fixture("text_ltx23.ckpt.safetensors")});
  const nlohmann::json e = test::text_io("ltx23").metadata_json("enhance");
  text::EnhanceOptions o;
  o.system_prompt = e["system_prompt"].get<std::string>();
  o.greedy = true;
  o.max_new_tokens = 8;
  EXPECT_EQ(enc.enhance(e["user_prompt"].get<std::string>(), o),
            e["clean_response"]["greedy"].get<std::string>());
  EXPECT_TRUE(enc.text_encoder_loaded());
  EXPECT_EQ(enc.encode({""}).size(), 1u);
  EXPECT_FALSE(enc.text_encoder_loaded());
  // gemma4_unified encodes but cannot enhance.
  PromptEncoder g4(test::fixture("text_gemma4.te.safetensors"), {});
  EXPECT_ERROR_HAS(g4.enhance("a cat", o), "gemma4_unified");
  EXPECT_FALSE(g4.text_encoder_loaded());
}

TEST(PromptEncoder, RefusesATextEncoderTheCheckpointWasNotTrainedWith) {
  const std::string te = test::fixture("text_gemma3.te.safetensors");
  const std::string ckpt = test::fixture("text_ltx25.transformer.safetensors");
  const std::string e = test::error_of([&] { PromptEncoder enc(te, {ckpt}); });
  EXPECT_NE(e.find(te), std::string::npos) << e;
  EXPECT_NE(e.find(ckpt), std::string::npos) << e;
}

TEST(PromptEncoder, WithoutACheckpointOnlyTokenizesAndRunsGemma) {
  PromptEncoder enc(test::fixture("text_gemma4.te.safetensors"), {});
  EXPECT_FALSE(enc.has_audio());
  EXPECT_EQ(enc.tokenize({"a cat"}).length, 1024);
  EXPECT_EQ(enc.gemma_config().model_type, "gemma4_unified");
  EXPECT_ERROR_HAS(enc.encode({"a cat"}), "LTX checkpoint");
  EXPECT_ERROR_HAS(enc.embeddings_processor(), "no LTX checkpoint");
}

}  // namespace
}  // namespace ltx
