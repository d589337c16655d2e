// Prompt enhancement against the golden Gemma 3 case (text_ltx23.io `enhance` metadata): the chat
// template rendering, the aligned model input, greedy generation with a KV cache (ids exact,
// per-step logits), decode + clean_response; the logits processors, the Gemma 4 chat format,
// sampling, and the errors (no system prompt, gemma4_unified, unknown template).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "models/gemma_support.h"
#include "models/text/gemma/enhance.h"

namespace ltx {
namespace {

using nlohmann::json;
using test::TempDir;
using text::GemmaAssets;
using text::GemmaTextModel;

const json& enhance_meta() {
  static const json m = test::text_io("ltx23").metadata_json("enhance");
  return m;
}

std::vector<int64_t> ints(const Tensor& t) { return t.to_int_vector(); }

struct Gemma3 {
  GemmaAssets assets;
  GemmaTextModel model;
  explicit Gemma3(const std::string& path)
      : assets(GemmaAssets::load(path)), model(GemmaTextModel::load(assets)) {}
};

const Gemma3& gemma3_te() {
  static const Gemma3 g(test::fixture("text_gemma3.te.safetensors"));
  return g;
}

text::EnhanceOptions greedy_options() {
  text::EnhanceOptions o;
  o.system_prompt = enhance_meta()["system_prompt"].get<std::string>();
  text::GenerationConfig g = text::default_enhance_generation(gemma3_te().model.config());
  g.do_sample = false;  // the fixture's switch to greedy decoding
  g.max_new_tokens = 8;
  o.generation = g;
  o.keep_logits = true;
  return o;
}

TEST(GemmaEnhance, RendersTheChatTemplateAndPadsTheInputLikeTheReference) {
  const text::PromptEnhancer enhancer(gemma3_te().assets, gemma3_te().model);
  EXPECT_EQ(enhancer.chat_format(), text::GemmaChatFormat::Gemma3);
  const text::EnhanceResult r =
      enhancer.prepare_t2v(enhance_meta()["user_prompt"].get<std::string>(),
                           enhance_meta()["system_prompt"].get<std::string>());
  EXPECT_EQ(r.rendered, enhance_meta()["rendered_text"].get<std::string>());
  const io::SafetensorsFile& io = test::text_io("ltx23");
  EXPECT_EQ(r.input_ids, ints(io.tensor("in.enhance.input_ids")));  // two BOS, 6 left pads
  EXPECT_EQ(r.attention_mask, ints(io.tensor("in.enhance.attention_mask")));
}

void expect_greedy_matches(const Gemma3& g) {
  const text::PromptEnhancer enhancer(g.assets, g.model);
  const text::EnhanceResult r =
      enhancer.enhance_t2v(enhance_meta()["user_prompt"].get<std::string>(), greedy_options());
  const io::SafetensorsFile& io = test::text_io("ltx23");
  EXPECT_EQ(r.generated_ids, ints(io.tensor("out.enhance.greedy.generated_ids")));
  const Tensor ref = io.tensor("out.enhance.greedy.logits");
  ASSERT_EQ(static_cast<int64_t>(r.logits.size()), ref.size(0));
  for (int64_t s = 0; s < ref.size(0); ++s)
    EXPECT_LE(
        test::max_rel_err(Tensor::from_vector(r.logits[static_cast<size_t>(s)], {ref.size(1)}),
                          ref.select(0, s)),
        1e-5)
        << "step " << s;
  EXPECT_EQ(r.decoded, enhance_meta()["decoded_greedy"].get<std::string>());
  EXPECT_EQ(r.text, enhance_meta()["clean_response"]["greedy"].get<std::string>());
}

TEST(GemmaEnhance, GreedyGenerationMatchesTheReferenceIdsAndLogits) {
  expect_greedy_matches(gemma3_te());
}

TEST(GemmaEnhance, RootFolderEnhancesLikeTheTextEncoderFile) {
  expect_greedy_matches(Gemma3(test::fixture("text_gemma3_root")));
}

TEST(GemmaEnhance, Gemma3DefaultsAreTheReferenceSampling) {
  const text::GenerationConfig g = text::default_enhance_generation(gemma3_te().model.config());
  EXPECT_TRUE(g.do_sample);
  EXPECT_EQ(g.temperature, 0.7);
  EXPECT_EQ(g.max_new_tokens, 512);
  EXPECT_EQ(g.top_k, 50);
  EXPECT_EQ(g.no_repeat_ngram_size, 0);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{1, 9}));
}

TEST(GemmaEnhance, SamplingIsSeededAndReproducible) {
  const text::PromptEnhancer enhancer(gemma3_te().assets, gemma3_te().model);
  text::EnhanceOptions o;
  o.system_prompt = enhance_meta()["system_prompt"].get<std::string>();
  o.max_new_tokens = 6;
  auto run = [&](uint64_t seed) {
    o.seed = seed;
    return enhancer.enhance_t2v("a cat", o).generated_ids;
  };
  const auto a = run(42), b = run(42);
  EXPECT_EQ(a, b);
  bool differs = false;
  for (uint64_t s = 1; s < 6 && !differs; ++s) differs = run(s) != a;
  EXPECT_TRUE(differs) << "sampling ignores the seed";
  for (const int64_t id : a) EXPECT_LT(id, gemma3_te().model.config().vocab_size);
}

TEST(GemmaEnhance, MissingSystemPromptNamesTheReferenceFile) {
  const text::PromptEnhancer enhancer(gemma3_te().assets, gemma3_te().model);
  try {
    enhancer.enhance_t2v("a cat");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemma3_t2v_system_prompt.txt"), std::string::npos)
        << e.what();
  }
}

TEST(GemmaEnhance, FindsTheSystemPromptInTheRootFolder) {
  TempDir dir;
  std::filesystem::copy(test::fixture("text_gemma3_root"), dir.file("root"));
  std::filesystem::create_directories(dir.file("root/prompts"));
  test::write_bytes(dir.file("root/prompts/gemma3_t2v_system_prompt.txt"), "Be vivid.");
  const GemmaAssets assets = GemmaAssets::load(dir.file("root"));
  EXPECT_EQ(text::find_default_system_prompt(assets, text::GemmaFamily::Gemma3, true), "Be vivid.");
  EXPECT_THROW(text::find_default_system_prompt(assets, text::GemmaFamily::Gemma3, false), Error);
  EXPECT_EQ(text::read_system_prompt_file(dir.file("root/prompts/gemma3_t2v_system_prompt.txt")),
            "Be vivid.");
  EXPECT_THROW(text::read_system_prompt_file(dir.file("nope.txt")), Error);
  // A user-supplied file is read when no text is given.
  const Gemma3& g = gemma3_te();
  const text::PromptEnhancer enhancer(g.assets, g.model);
  text::EnhanceOptions o = greedy_options();
  const std::string text = o.system_prompt;
  o.system_prompt.clear();
  o.system_prompt_file = dir.file("sys.txt");
  test::write_bytes(o.system_prompt_file, text);
  EXPECT_EQ(enhancer.enhance_t2v(enhance_meta()["user_prompt"].get<std::string>(), o).rendered,
            enhance_meta()["rendered_text"].get<std::string>());
}

TEST(GemmaEnhance, Gemma4UnifiedCannotEnhance) {
  const GemmaAssets a = GemmaAssets::load(test::fixture("text_gemma4.te.safetensors"));
  const GemmaTextModel m = GemmaTextModel::load(a);
  try {
    text::PromptEnhancer e(a, m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemma4_unified"), std::string::npos) << e.what();
  }
}

TEST(GemmaEnhance, RendersTheGemma4ChatFormat) {
  const std::vector<text::ChatMessage> m = {{"system", " Be vivid. \n"},
                                            {"user", "user prompt: a cat "}};
  EXPECT_EQ(text::render_gemma_chat(text::GemmaChatFormat::Gemma4, m, "<bos>"),
            "<bos><|turn>system\nBe vivid.<turn|>\n<|turn>user\nuser prompt: a cat<turn|>\n"
            "<|turn>model\n");
  // Gemma 3 folds the (untrimmed) system text into the first user turn.
  EXPECT_EQ(text::render_gemma_chat(text::GemmaChatFormat::Gemma3, m, "<bos>"),
            "<bos><start_of_turn>user\n Be vivid. \n\n\nuser prompt: a cat<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(text::detect_chat_format("{{ '<|turn>' + role }}", "x"), text::GemmaChatFormat::Gemma4);
  EXPECT_THROW(text::detect_chat_format("{{ '<|im_start|>' }}", "x"), Error);
}

// Google's Gemma 4 templates end the generation prompt differently: the 12B/26B/31B ones close an
// empty thought channel when thinking is off (the default, and the reference never turns it on),
// the E2B/E4B ones do not. The rendering follows the model's own template.
TEST(GemmaEnhance, Gemma4EmptyThoughtChannelFollowsTheTemplate) {
  const std::string mainline =
      R"({%- if add_generation_prompt -%}{{- '<|turn>model\n' -}})"
      R"({%- if not enable_thinking | default(false) -%}{{- '<|channel>thought\n<channel|>' -}})"
      R"({%- endif -%}{%- endif -%})";
  const std::string e_series = R"({%- if add_generation_prompt -%}{{- '<|turn>model\n' -}}{%- endif -%})";
  const text::GemmaChatTemplate m = text::parse_chat_template(mainline, "x");
  EXPECT_EQ(m.format, text::GemmaChatFormat::Gemma4);
  EXPECT_TRUE(m.empty_thought_channel);
  EXPECT_FALSE(text::parse_chat_template(e_series, "x").empty_thought_channel);
  EXPECT_FALSE(text::parse_chat_template("{{ '<start_of_turn>' }}", "x").empty_thought_channel);
  const std::vector<text::ChatMessage> msgs = {{"system", "Be vivid."}, {"user", "a cat"}};
  EXPECT_EQ(text::render_gemma_chat(m, msgs, "<bos>"),
            "<bos><|turn>system\nBe vivid.<turn|>\n<|turn>user\na cat<turn|>\n"
            "<|turn>model\n<|channel>thought\n<channel|>");
  EXPECT_EQ(text::render_gemma_chat(m, msgs, "<bos>", false),
            "<bos><|turn>system\nBe vivid.<turn|>\n<|turn>user\na cat<turn|>\n");
}

TEST(GemmaEnhance, Gemma4DenseDefaultsAreGreedyWithoutRepeatedFiveGrams) {
  text::GemmaTextConfig c = gemma3_te().model.config();
  c.family = text::GemmaFamily::Gemma4;
  const text::GenerationConfig g = text::default_enhance_generation(c);
  EXPECT_FALSE(g.do_sample);
  EXPECT_EQ(g.no_repeat_ngram_size, 5);
  EXPECT_EQ(g.max_new_tokens, 600);
}

TEST(GemmaGenerate, NoRepeatNgramBansEveryContinuationOfARepeatedPrefix) {
  std::vector<float> logits(10, 0.0f);
  // 3-grams: (1,2,3), (2,3,1), (3,1,2), (1,2,4); the sequence ends with (1,2) -> ban 3 and 4.
  text::apply_no_repeat_ngram(logits, {1, 2, 3, 1, 2, 4, 1, 2}, 3);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(std::isinf(logits[static_cast<size_t>(i)]), i == 3 || i == 4) << i;
  std::vector<float> short_logits(10, 0.0f);
  text::apply_no_repeat_ngram(short_logits, {1}, 3);  // too short: nothing banned
  for (const float x : short_logits) EXPECT_EQ(x, 0.0f);
}

TEST(GemmaGenerate, WarpersKeepTheTopKAndTheTopPNucleus) {
  std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.0f, 2.0f};
  text::apply_sampling_warpers(l, 0.5, 3, 1.0);
  EXPECT_EQ(l[1], 6.0f);
  EXPECT_EQ(l[2], 4.0f);
  EXPECT_EQ(l[4], 4.0f);  // ties at the k-th value are kept
  EXPECT_TRUE(std::isinf(l[0]) && std::isinf(l[3]));
  std::vector<float> p = {0.0f, std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  p[0] = -100.0f;
  text::apply_sampling_warpers(p, 1.0, 0, 0.85);  // keeps 0.6 + 0.3
  EXPECT_FALSE(std::isinf(p[1]));
  EXPECT_FALSE(std::isinf(p[2]));
  EXPECT_TRUE(std::isinf(p[3]) && std::isinf(p[0]));
  EXPECT_THROW(text::apply_sampling_warpers(p, 0.0, 0, 1.0), Error);
}

TEST(GemmaGenerate, StopsAtEos) {
  const GemmaTextModel& m = gemma3_te().model;
  const std::vector<int64_t> ids = {2, 2, 300, 301};
  const std::vector<int64_t> mask(4, 1);
  text::GenerationConfig g;
  g.max_new_tokens = 5;
  const auto free_run = text::generate(m, ids, mask, g).tokens;
  ASSERT_EQ(free_run.size(), 5u);
  g.eos_token_ids = {free_run[2]};
  const auto stopped = text::generate(m, ids, mask, g).tokens;
  const auto first = std::find(free_run.begin(), free_run.end(), free_run[2]);
  EXPECT_EQ(stopped, std::vector<int64_t>(free_run.begin(), first + 1));
}

// The one-call API behind `ltx generate --enhance-prompt`: a user system-prompt file, greedy
// decoding, the cleaned text of the reference's greedy run.
TEST(GemmaEnhance, EnhancePromptLoadsEnhancesAndCleans) {
  TempDir dir;
  text::EnhanceOptions o;
  o.system_prompt_file = dir.file("system.txt");
  test::write_bytes(o.system_prompt_file, enhance_meta()["system_prompt"].get<std::string>());
  o.greedy = true;
  o.max_new_tokens = 8;
  const std::string prompt = enhance_meta()["user_prompt"].get<std::string>();
  EXPECT_EQ(text::enhance_prompt(test::fixture("text_gemma3_root"), prompt, o),
            enhance_meta()["clean_response"]["greedy"].get<std::string>());
  // Without the greedy switch Gemma 3 samples (seeded): reproducible for one seed.
  o.greedy = false;
  o.max_new_tokens = 4;
  const std::string te = test::fixture("text_gemma3.te.safetensors");
  EXPECT_EQ(text::enhance_prompt(te, prompt, o), text::enhance_prompt(te, prompt, o));
  // A text encoder that cannot generate, and a missing system prompt, fail before generating.
  EXPECT_ERROR_HAS(text::enhance_prompt(test::fixture("text_gemma4.te.safetensors"), prompt, o),
                   "gemma4_unified");
  EXPECT_ERROR_HAS(text::enhance_prompt(te, prompt), "gemma3_t2v_system_prompt.txt");
}

TEST(GemmaClean, MapsPunctuationAndDropsLeadingNonLetters) {
  EXPECT_EQ(text::clean_response("  **\u201cHello\u201d \u2014 it\u2019s\u00a0fine\u2212ok"),
            "Hello\" - it's fine-ok");
  EXPECT_EQ(text::clean_response("1. \u00c9t\u00e9"), "\u00c9t\u00e9");
  EXPECT_EQ(text::clean_response("\u6771\u4eac"), "\u6771\u4eac");  // CJK letters count
  EXPECT_EQ(text::clean_response("123 \u2014"), "123 -");           // no letter: kept whole
  EXPECT_EQ(text::clean_response(""), "");
}

}  // namespace
}  // namespace ltx
